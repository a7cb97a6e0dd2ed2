"""Lifecycles: the built-in ones, a deployment's file on top, and bad files in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamproc.judge.records.lifecycles import LifecycleError, load_lifecycles

REQUIRED = (
    "order", "refund", "payment", "shipment", "booking", "claim", "subscription",
    "appointment", "ticket",
)  # fmt: skip


def test_the_built_in_lifecycles_cover_the_cases_agents_answer_about() -> None:
    cycles = load_lifecycles()
    assert set(REQUIRED) <= set(cycles.by_name)
    refund = cycles.by_name["refund"]
    queued = refund.record_state("QUEUED_FOR_REVIEW")
    assert refund.allows(refund.states_named("waiting for a review"), queued)
    assert not refund.allows(refund.states_named("issued"), queued)
    parcel = cycles.by_name["shipment"]
    assert parcel.allows(parcel.states_named("shipped"), parcel.record_state("DELIVERED"))
    assert not parcel.allows(parcel.states_named("delivered"), parcel.record_state("IN_TRANSIT"))


def test_a_value_that_waits_for_a_state_is_not_in_it() -> None:
    booking = load_lifecycles().by_name["booking"]
    waiting = booking.record_state("PENDING_HOTEL_CONFIRMATION")
    assert not booking.allows(booking.states_named("confirmed"), waiting)


def test_a_deployment_adds_and_replaces_lifecycles(tmp_path: Path) -> None:
    extra = tmp_path / "lifecycles.toml"
    extra.write_text(
        """
[loan]
nouns = ["loan"]
[loan.states]
applied = { says = ["applied for"] }
disbursed = { says = ["paid out"], implies = ["applied"] }

[refund]
nouns = ["refund"]
[refund.states]
open = {}
done = { says = ["issued"], implies = ["open"] }
"""
    )
    cycles = load_lifecycles(extra)
    loan = cycles.by_name["loan"]
    assert loan.allows(loan.states_named("applied for"), loan.record_state("disbursed"))
    assert set(cycles.by_name["refund"].states) == {"open", "done"}
    assert "order" in cycles.by_name  # the others stay
    assert cycles.source == "lifecycles.toml + lifecycles.toml" and cycles.sha256


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[x", "not valid TOML"),
        ("[x]\nnouns = 3", "x.nouns: expected a list"),
        ("[x]\nnouns = []", "needs a non-empty states table"),
        ("[x]\n[x.states]\na = { implies = ['b'] }", "implies unknown states"),
        ("[x]\ncolour = 1\n[x.states]\na = {}", "unknown keys"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    extra = tmp_path / "bad.toml"
    extra.write_text(text)
    with pytest.raises(LifecycleError, match=message) as caught:
        load_lifecycles(extra)
    assert "\n" not in str(caught.value)
    with pytest.raises(LifecycleError, match="cannot read"):
        load_lifecycles(tmp_path / "missing.toml")
