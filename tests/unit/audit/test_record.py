"""The audit record builder: the event byte-identical, the judgement whole, the context
an auditor needs (judge, settings, code version, trace, origin)."""

from __future__ import annotations

import base64
import hashlib

import pytest

from streamproc.audit import AuditRecord, build_audit_record, code_version
from streamproc.config import Settings
from streamproc.contracts.events import Action, JudgeInfo, VerdictLabel
from streamproc.verdicts.options import applied_settings
from tests.unit.audit.audit_samples import (
    EVIDENCE_TEXT,
    INPUT_TOPIC,
    SETTINGS,
    TRACE_ID,
    raw_answer,
    verdicts_for,
)


def build(raw: bytes, **overrides: object) -> AuditRecord:
    [verdict] = verdicts_for([raw])
    options: dict[str, object] = {
        "origin_topic": INPUT_TOPIC,
        "origin_partition": 4,
        "origin_offset": 1234,
        "settings_applied": SETTINGS,
        "trace_id": None,
    }
    options.update(overrides)
    return build_audit_record(raw, verdict, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("index", [0, 1], ids=["escaped-unicode", "raw-utf8"])
def test_the_event_round_trips_byte_identical_through_the_published_json(index: int) -> None:
    raw = raw_answer(index)
    record = build(raw)
    published = record.model_dump_json()
    back = AuditRecord.model_validate_json(published)
    assert back.event_bytes() == raw
    assert back.event_sha256 == hashlib.sha256(raw).hexdigest()
    assert back == record
    # the parsed copy is for display; the evidence text is the one the assistant got
    assert back.evidence_text("D1") == EVIDENCE_TEXT
    assert back.evidence_text("nope") is None
    assert back.question == "Where is order 7?"


def test_the_record_carries_claims_action_judge_settings_and_origin() -> None:
    record = build(raw_answer(2, grounded=False))
    [claim] = record.claims
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.evidence_ids == ["D1"] and claim.citations == ["D1"]
    assert claim.reasons, "reason codes are kept"
    assert record.answer[claim.start : claim.end].startswith(claim.text[:-1])
    assert record.action is Action.WITHHOLD and record.judgement.hallucinated
    assert record.judge.name == "rules" and record.judge.thresholds
    assert record.settings_applied["judge"]["name"] == "rules"
    assert record.code_version == code_version() != "unknown"
    assert (record.origin.topic, record.origin.partition, record.origin.offset) == (
        INPUT_TOPIC,
        4,
        1234,
    )
    assert record.trace_id == TRACE_ID, "falls back to the verdict's trace id"
    assert build(raw_answer(2), trace_id="f" * 32).trace_id == "f" * 32
    assert record.timings is not None and record.judged_at >= record.occurred_at
    assert record.calibrator is None, "the rules judge uses no calibrator"


def test_an_answer_received_over_http_names_no_partition_or_offset() -> None:
    """The gate's HTTP path reads from no topic: -1, and the CLI says so in words."""
    record = build(raw_answer(0), origin_topic="gate.http", origin_partition=-1, origin_offset=-1)
    back = AuditRecord.model_validate_json(record.model_dump_json())
    assert (back.origin.partition, back.origin.offset) == (-1, -1)
    assert back.origin.describe() == "gate.http (received over HTTP, not read from a topic)"
    assert build(raw_answer(0)).origin.describe() == f"{INPUT_TOPIC} partition 4 offset 1234"
    with pytest.raises(ValueError, match="greater than or equal to -1"):
        build(raw_answer(0), origin_offset=-2)


def test_the_calibrator_is_named_when_the_nli_judge_decided() -> None:
    raw = raw_answer(0)
    [verdict] = verdicts_for([raw])
    nli = verdict.model_copy(
        update={"judge": JudgeInfo(name="nli", version="1", granularity="atomic")}
    )
    settings = applied_settings(Settings().judge, Settings().worker, Settings().topics)
    record = build_audit_record(
        raw,
        nli,
        origin_topic="t",
        origin_partition=0,
        origin_offset=0,
        settings_applied=settings,
        trace_id=None,
    )
    assert record.calibrator == Settings().judge.calibrator


def test_a_verdict_about_another_event_is_refused() -> None:
    [verdict] = verdicts_for([raw_answer(0)])
    with pytest.raises(ValueError, match="not the one verdict"):
        build_audit_record(
            raw_answer(1),
            verdict,
            origin_topic="t",
            origin_partition=0,
            origin_offset=0,
            settings_applied={},
            trace_id=None,
        )


def test_applied_settings_hold_no_broker_or_credentials() -> None:
    settings = Settings(
        broker_url="kafka://secret-host:9092",
        security={"protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "hunter2"},
    )
    text = str(applied_settings(settings.judge, settings.worker, settings.topics))
    assert "secret-host" not in text and "hunter2" not in text
    assert applied_settings(settings.judge, settings.worker, settings.topics)[
        "judge"
    ] == settings.judge.model_dump(mode="json")


def test_the_event_bytes_are_base64_of_the_raw_input() -> None:
    raw = raw_answer(1)
    assert base64.b64decode(build(raw).event_b64) == raw
