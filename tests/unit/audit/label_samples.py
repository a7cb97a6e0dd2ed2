"""Reviewers' label entries for the audit tests, made from real audit records as the
labels loop makes them: the reviewer's label next to the judge's decision."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import timedelta

from streamproc.audit import AuditRecord
from streamproc.contracts.label_events import (
    AnswerLabel,
    ClaimLabel,
    ClaimLabelValue,
    LabelAuditEntry,
    LabelEvent,
)
from tests.unit.audit.audit_samples import NOW

__all__ = ["NOTE", "label_bytes", "make_label"]

NOTE = "The depot note says 5 May \u2014 the judge misread the “KX-1” tracking line."
"""Free text with non-ASCII, as a reviewer's note may be."""


def make_label(
    record: AuditRecord,
    label_id: str,
    *,
    reviewer: str = "alice",
    answer_label: AnswerLabel | None = "faithful",
    claims: Mapping[int, ClaimLabelValue] | None = None,
    note: str | None = NOTE,
    hours_later: int = 1,
) -> LabelAuditEntry:
    """The entry the labels loop would publish for one reviewer's label of ``record``."""
    labelled_at = NOW + timedelta(hours=hours_later)
    event = LabelEvent(
        label_id=label_id,
        answer_id=record.answer_id,
        tenant=record.tenant,
        reviewer=reviewer,
        labelled_at=labelled_at,
        answer_label=answer_label,
        claims=[ClaimLabel(index=i, label=v) for i, v in sorted((claims or {}).items())],
        note=note,
    )
    judged = {claim.index: claim.verdict for claim in record.claims}
    disagreeing = [
        index
        for index, value in sorted((claims or {}).items())
        if value is not ClaimLabelValue.CANT_TELL
        and judged.get(index) is not None
        and value.value != str(judged[index])
    ]
    hallucinated = record.judgement.hallucinated
    return LabelAuditEntry(
        answer_id=record.answer_id,
        tenant=record.tenant,
        assistant_id=record.assistant_id,
        label=event,
        label_sha256=hashlib.sha256(event.model_dump_json().encode()).hexdigest(),
        judge_key=f"{record.judge.name}@{record.judge.version}",
        judge_hallucinated=hallucinated,
        agrees_with_judge=None
        if answer_label is None
        else (answer_label == "hallucinated") == hallucinated,
        claims_disagreeing=disagreeing,
        recorded_at=labelled_at + timedelta(seconds=2),
    )


def label_bytes(entry: LabelAuditEntry) -> bytes:
    """The entry as the labels loop puts it on the audit topic."""
    return entry.model_dump_json().encode()
