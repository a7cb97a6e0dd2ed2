"""The audit record: everything an auditor needs about one judged answer, in one document.

One record per answer goes to the compacted audit topic (key: the answer id) in the same
Kafka transaction as the verdict, and from there to the audit store (``audit-sink``).
It holds the event exactly as received - its original bytes, base64, so evidence can be
shown byte-identical to what the assistant was given - next to the parsed question,
answer and evidence for display; the judgement (every claim with its span, class,
verdict, score, reason codes, deciding evidence ids, citations and confidence mark; the
action); the judge with its thresholds and model hashes; the settings that applied; the
code version; the trace id; the timestamps; and where the input was read.

Building a record is pure (:func:`build_audit_record`), so the judging stage can make it
next to the verdict and no broker is needed to test it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    ClaimVerdict,
    EvidenceItem,
    JudgeInfo,
    Timings,
    Verdict,
)

__all__ = [
    "RECORD_VERSION",
    "AuditRecord",
    "InputOrigin",
    "build_audit_record",
    "code_version",
]

RECORD_VERSION: Final = 1


class InputOrigin(BaseModel):
    """Where the answer event was read: enough to find it again on the input topic. An
    answer the gate received over HTTP was read from no topic: ``gate.http``, partition
    and offset -1 (its bytes are in the record itself)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    topic: str
    partition: int = Field(ge=-1, description="-1: not read from Kafka (the gate's HTTP path).")
    offset: int = Field(ge=-1, description="-1: not read from Kafka (the gate's HTTP path).")

    def describe(self) -> str:
        """Where it came from, as the audit CLI prints it."""
        if self.partition < 0:
            return f"{self.topic} (received over HTTP, not read from a topic)"
        return f"{self.topic} partition {self.partition} offset {self.offset}"


class AuditRecord(BaseModel):
    """One judged answer, as an auditor replays it.

    Frozen: a record is evidence and nobody edits it. Unknown fields are ignored when
    reading (``extra="ignore"``), so an older sink still stores a newer worker's records;
    the store hashes and keeps the JSON as published, unknown fields included."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    record_version: Literal[1] = RECORD_VERSION
    answer_id: str
    event_id: str
    conversation_id: str
    tenant: str
    assistant_id: str
    model: str
    occurred_at: AwareDatetime
    judged_at: AwareDatetime
    event_b64: str = Field(description="The answer event's bytes exactly as received, base64.")
    event_sha256: str = Field(description="sha256 (hex) of those bytes.")
    question: str | None = Field(description="Parsed from the event, for display.")
    answer: str = Field(description="Parsed from the event, for display.")
    evidence: list[EvidenceItem] = Field(description="Parsed from the event, for display.")
    judgement: AnswerJudgement
    judge: JudgeInfo
    calibrator: str | None = Field(
        default=None,
        description="The verdict calibrator that applied (its sha256 is in judge.models).",
    )
    timings: Timings | None = None
    settings_applied: dict[str, Any] = Field(default_factory=dict)
    code_version: str
    trace_id: str | None = None
    origin: InputOrigin

    @property
    def claims(self) -> list[ClaimVerdict]:
        return self.judgement.claims

    @property
    def action(self) -> Action:
        return self.judgement.action

    def event_bytes(self) -> bytes:
        """The answer event exactly as it was received."""
        return base64.b64decode(self.event_b64, validate=True)

    def evidence_text(self, evidence_id: str) -> str | None:
        """The text of one evidence item, as the assistant was given it."""
        return next((item.text for item in self.evidence if item.id == evidence_id), None)


def build_audit_record(
    raw: bytes,
    verdict: Verdict,
    *,
    origin_topic: str,
    origin_partition: int,
    origin_offset: int,
    settings_applied: Mapping[str, object],
    trace_id: str | None,
) -> AuditRecord:
    """The audit record of one judged answer.

    ``raw`` is the answer event's bytes as read from the input topic (the judging
    stage's ``IncomingMessage.value``); ``verdict`` is the verdict made from it, whole
    (before any trimming to fit the verdict topic). ``settings_applied`` is what
    :func:`streamproc.verdicts.options.applied_settings` returns for the worker's
    settings. ``trace_id`` is the trace the answer's processing belongs to; None falls
    back to the verdict's.

    Raises ``ValueError`` when ``raw`` is not the event the verdict is about (a wiring
    bug, not bad input: only events that were judged reach here)."""
    event = AnswerEvent.model_validate_json(raw)
    if (event.event_id, event.answer_id) != (verdict.event_id, verdict.answer_id):
        raise ValueError(
            f"event {event.event_id!r}/{event.answer_id!r} is not the one verdict "
            f"{verdict.event_id!r}/{verdict.answer_id!r} is about"
        )
    return AuditRecord(
        answer_id=verdict.answer_id,
        event_id=verdict.event_id,
        conversation_id=verdict.conversation_id,
        tenant=verdict.tenant,
        assistant_id=verdict.assistant_id,
        model=verdict.model,
        occurred_at=verdict.occurred_at,
        judged_at=verdict.judged_at,
        event_b64=base64.b64encode(raw).decode("ascii"),
        event_sha256=hashlib.sha256(raw).hexdigest(),
        question=event.question,
        answer=event.answer,
        evidence=event.evidence,
        judgement=verdict.judgement,
        judge=verdict.judge,
        calibrator=_calibrator(settings_applied, verdict.judge),
        timings=verdict.timings,
        settings_applied=dict(settings_applied),
        code_version=code_version(),
        trace_id=trace_id if trace_id is not None else verdict.trace_id,
        origin=InputOrigin(topic=origin_topic, partition=origin_partition, offset=origin_offset),
    )


@cache
def code_version() -> str:
    """streamproc's version: the package's own, else the installed distribution's."""
    try:
        from streamproc import __version__
    except ImportError:
        __version__ = ""
    if __version__:
        return str(__version__)
    try:
        return metadata.version("streamproc")
    except metadata.PackageNotFoundError:
        return "unknown"


def _calibrator(settings_applied: Mapping[str, object], judge: JudgeInfo) -> str | None:
    """The configured calibrator, if the judge that decided used one (the NLI judge lists
    it among its models)."""
    judge_settings = settings_applied.get("judge")
    if not isinstance(judge_settings, Mapping):
        return None
    name = judge_settings.get("calibrator")
    if not isinstance(name, str) or not name or judge.name != "nli":
        return None
    return name
