"""Every topic the worker writes, named, keyed and sized in one place.

The keys are a contract with readers (docs/stream.md, "Topics and keys"): verdicts and flags
by ``answer_id`` - what products look an answer up by; audit records by
``tenant/answer_id`` (the topic is compacted: two tenants' answers sharing an id must not
replace each other, nor one's purge tombstone remove the other's record); outcomes and
window aggregates (tumbling and hopping) by ``assistant_id``, so one assistant's
outcomes meet in one partition and its windows arrive in order; alert events by
``tenant/assistant``; dead letters by the original key. Each topic's size limit is the
``max.message.bytes`` that :func:`~streamproc.kafka.topics.topic_specs` creates it with,
read from the same settings, so the fitting and the broker agree. The composition root
builds the catalog once (:func:`streamproc.wiring.output_topics`) and hands it to every
loop that writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamproc.contracts.alert_events import AlertEvent
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.events import AnswerOutcome, DeadLetter, Flag, Verdict, WindowAggregate
from streamproc.contracts.label_events import (
    JudgeAccuracyEvent,
    LabelAuditEntry,
    LabelDelta,
    LabelEvent,
    ReviewItem,
)
from streamproc.contracts.topic_names import TopicNames
from streamproc.verdicts.dead_letter import original_key
from streamproc.verdicts.fit import fit_dead_letter, fit_verdict
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.topic_names import (
    AUDIT_MAX_MESSAGE_BYTES,
    DEAD_LETTER_MAX_BYTES,
)

__all__ = ["LABEL_KEY_PREFIX", "OutputTopics"]


@dataclass(frozen=True, slots=True)
class OutputTopics:
    """The worker's output topics; build them with :meth:`named`."""

    verdicts: OutputTopic[Verdict]
    flags: OutputTopic[Flag]
    outcomes: OutputTopic[AnswerOutcome]
    audit: OutputTopic[AuditRecord]
    dead_letters: OutputTopic[DeadLetter]
    aggregates: OutputTopic[WindowAggregate]
    """Tumbling windows."""
    hopping: OutputTopic[WindowAggregate]
    late: OutputTopic[AnswerOutcome]
    """Outcomes too late for any window, forwarded as the judging stage wrote them."""
    alerts: OutputTopic[AlertEvent]
    window_state: OutputTopic[Any]
    """The window loop's changelog: entries come encoded by the window store."""
    review_items: OutputTopic[ReviewItem]
    labels: OutputTopic[LabelEvent]
    """Where the review page and ``review import`` publish reviewers' labels."""
    label_audit: OutputTopic[LabelAuditEntry]
    """Accepted labels, on the audit topic (key ``label:<answer_id>:<label_id>``)."""
    label_deltas: OutputTopic[LabelDelta]
    judge_accuracy: OutputTopic[JudgeAccuracyEvent]
    labels_state: OutputTopic[Any]
    """The labels loop's changelog."""
    accuracy_state: OutputTopic[Any]
    """The accuracy loop's changelog."""

    @classmethod
    def named(cls, names: TopicNames, output_max_bytes: int) -> OutputTopics:
        """The catalog of the topics ``names`` names: each limited to ``output_max_bytes``
        (``topics.output_max_message_bytes``) but the dead letters, the audit topic and
        the review queue, which have fixed caps of their own."""
        limit = output_max_bytes
        return cls(
            verdicts=OutputTopic(names.verdicts, limit, _answer_key, fit_verdict),
            flags=OutputTopic(names.flags, limit, _answer_key),
            outcomes=OutputTopic(names.outcomes, limit, _assistant_key),
            audit=OutputTopic(names.audit, AUDIT_MAX_MESSAGE_BYTES, _audit_key),
            dead_letters=OutputTopic(
                names.dead_letter, DEAD_LETTER_MAX_BYTES, original_key, fit_dead_letter
            ),
            aggregates=OutputTopic(names.aggregates, limit, _assistant_key),
            hopping=OutputTopic(names.hopping, limit, _assistant_key),
            late=OutputTopic(names.late, limit, _assistant_key),
            alerts=OutputTopic(names.alerts, limit, _alert_key),
            window_state=OutputTopic(names.window_changelog, limit),
            review_items=OutputTopic(names.review_queue, AUDIT_MAX_MESSAGE_BYTES, _answer_key),
            labels=OutputTopic(names.labels, limit, _answer_key),
            label_audit=OutputTopic(names.audit, AUDIT_MAX_MESSAGE_BYTES, _label_key),
            label_deltas=OutputTopic(names.label_deltas, limit, _cell_key),
            judge_accuracy=OutputTopic(names.judge_accuracy, limit, _cell_key),
            labels_state=OutputTopic(names.labels_changelog, limit),
            accuracy_state=OutputTopic(names.accuracy_changelog, limit),
        )


# Module-level functions, not lambdas: the topics pickle into the judge's own process.


def _answer_key(model: Verdict | Flag | ReviewItem | LabelEvent) -> bytes:
    return model.answer_id.encode()


def audit_record_key(tenant: str, answer_id: str) -> str:
    """The audit-topic key of an answer's record (and of its purge tombstone)."""
    return f"{tenant}/{answer_id}"


def _audit_key(record: AuditRecord) -> bytes:
    return audit_record_key(record.tenant, record.answer_id).encode()


LABEL_KEY_PREFIX = "label:"
"""Audit-topic keys of label entries start so: the sink tells them from answer records."""


def _label_key(entry: LabelAuditEntry) -> bytes:
    return f"{LABEL_KEY_PREFIX}{entry.answer_id}:{entry.label.label_id}".encode()


def _cell_key(model: LabelDelta | JudgeAccuracyEvent) -> bytes:
    return model.cell.key.encode()


def _assistant_key(model: AnswerOutcome | WindowAggregate) -> bytes:
    return model.assistant_id.encode()


def _alert_key(event: AlertEvent) -> bytes:
    return f"{event.tenant}/{event.assistant_id}".encode()
