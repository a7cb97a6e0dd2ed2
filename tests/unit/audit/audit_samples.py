"""Real audit records for the audit tests: answer events judged by the rules judge
through the judging stage, then built into records as a worker would."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from streamproc.audit import AuditRecord, build_audit_record
from streamproc.config import Settings
from streamproc.contracts.events import Verdict
from streamproc.inference.options import JudgeSettings
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.options import applied_settings
from streamproc.verdicts.stage import IncomingMessage, StageLimits, judge_messages
from streamproc.wiring import build_judge

__all__ = [
    "EVIDENCE_TEXT",
    "INPUT_TOPIC",
    "NOW",
    "TRACE_ID",
    "make_records",
    "raw_answer",
    "verdicts_for",
]

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
INPUT_TOPIC = "assistant.answers"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
EVIDENCE_TEXT = "Order 7 was shipped on 5 May from the Köln depot \u2014 tracking “KX-1”."
RULES = build_judge(JudgeSettings(name="rules"))
_RULES = Settings(judge={"name": "rules"})
SETTINGS = applied_settings(_RULES.judge, _RULES.worker, _RULES.topics)


def raw_answer(
    index: int,
    *,
    conversation: str = "conv-1",
    tenant: str = "acme",
    assistant: str = "helpdesk",
    grounded: bool = True,
    occurred_at: datetime | None = None,
) -> bytes:
    """An answer event as a producer might write it: odd spacing, non-ASCII evidence
    both raw and escaped, keys in no particular order - bytes a re-serialiser would
    change."""
    claim = (
        "Order 7 was shipped on 5 May [D1]." if grounded else "Order 7 was shipped on 3 May [D1]."
    )
    moment = (occurred_at or NOW - timedelta(minutes=index)).isoformat()
    document = {
        "answer": claim,
        "event_id": f"ev-{index}",
        "answer_id": f"ans-{index}",
        "conversation_id": conversation,
        "tenant": tenant,
        "assistant_id": assistant,
        "model": "llm-1",
        "occurred_at": moment,
        "question": "Where is order 7?",
        "evidence": [{"id": "D1", "text": EVIDENCE_TEXT, "kind": "passage"}],
    }
    text = json.dumps(document, indent=1, ensure_ascii=index % 2 == 0)
    return ("  " + text + "\n").encode("utf-8")


def verdicts_for(raws: Sequence[bytes]) -> list[Verdict]:
    messages = [
        IncomingMessage(raw, MessageOrigin(INPUT_TOPIC, 0, offset, None), TRACE_ID)
        for offset, raw in enumerate(raws)
    ]
    output = judge_messages(messages, RULES, now=NOW, limits=StageLimits(max_event_bytes=10**6))
    assert not output.dead_letters, output.dead_letters
    return output.verdicts


def make_records(
    count: int,
    *,
    start: int = 0,
    conversation: str = "conv-1",
    tenant: str = "acme",
    occurred_at: datetime | None = None,
) -> list[AuditRecord]:
    """``count`` records, every third answer ungrounded (so flagged)."""
    raws = [
        raw_answer(
            index,
            conversation=conversation,
            tenant=tenant,
            grounded=index % 3 != 2,
            occurred_at=occurred_at,
        )
        for index in range(start, start + count)
    ]
    return [
        build_audit_record(
            raw,
            verdict,
            origin_topic=INPUT_TOPIC,
            origin_partition=0,
            origin_offset=offset,
            settings_applied=SETTINGS,
            trace_id=None,
        )
        for offset, (raw, verdict) in enumerate(zip(raws, verdicts_for(raws), strict=True))
    ]
