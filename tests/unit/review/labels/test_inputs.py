"""An input record of the reviewers' loops: its model, or the reason for its dead letter."""

from __future__ import annotations

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.label_events import AccuracyCell
from streamproc.review.labels.inputs import parse_input
from streamproc.verdicts.dead_letter import Rejection

CELL = AccuracyCell(tenant="acme", assistant_id="bot", task_type="Summary", judge_key="rules")


def test_a_valid_document_is_its_model() -> None:
    assert parse_input(AccuracyCell, CELL.model_dump_json().encode(), "cell") == CELL


def test_bad_json_and_a_tombstone_are_bad_json() -> None:
    for value in (b"{not json", None, b"[" * 100_000):
        rejected = parse_input(AccuracyCell, value, "cell")
        assert isinstance(rejected, Rejection)
        assert rejected.reason is DeadLetterReason.BAD_JSON
        assert rejected.error.startswith("cell is not JSON: ")


def test_json_that_is_not_the_model_is_a_schema_violation() -> None:
    rejected = parse_input(AccuracyCell, b'{"tenant": "acme"}', "cell")
    assert isinstance(rejected, Rejection)
    assert rejected.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejected.error.startswith("bad cell: ")
