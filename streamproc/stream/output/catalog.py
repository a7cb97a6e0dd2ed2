"""Every topic the worker writes, named, keyed and sized in one place.

The keys are a contract with readers (README, "Topics"): verdicts, flags and audit
records by ``answer_id`` - what auditors and products look an answer up by; outcomes and
window aggregates (tumbling and hopping) by ``assistant_id``, so one assistant's
outcomes meet in one partition and its windows arrive in order; alert events by
``tenant/assistant``; dead letters by the original key. Each topic's size limit is the
``max.message.bytes`` that :func:`~streamproc.stream.topics.topic_specs` creates it with,
read from the same settings, so the fitting and the broker agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamproc.alerting.alert_state import AlertEvent
from streamproc.audit.record import AuditRecord
from streamproc.config import Settings
from streamproc.events import AnswerOutcome, DeadLetter, Flag, Verdict, WindowAggregate
from streamproc.stream.output.dead_letter import original_key
from streamproc.stream.output.fit import fit_dead_letter, fit_verdict
from streamproc.stream.output.topic import OutputTopic
from streamproc.stream.topics import (
    AUDIT_MAX_MESSAGE_BYTES,
    DEAD_LETTER_MAX_BYTES,
    window_changelog_topic,
)

__all__ = ["OutputTopics"]


@dataclass(frozen=True, slots=True)
class OutputTopics:
    """The worker's output topics; build them with :meth:`from_settings`."""

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

    @classmethod
    def from_settings(cls, settings: Settings) -> OutputTopics:
        topics, limit = settings.topics, settings.topics.output_max_message_bytes
        return cls(
            verdicts=OutputTopic(topics.verdicts, limit, _answer_key, fit_verdict),
            flags=OutputTopic(topics.flags, limit, _answer_key),
            outcomes=OutputTopic(topics.outcomes, limit, _assistant_key),
            audit=OutputTopic(settings.audit.topic, AUDIT_MAX_MESSAGE_BYTES, _answer_key),
            dead_letters=OutputTopic(
                topics.dead_letter, DEAD_LETTER_MAX_BYTES, original_key, fit_dead_letter
            ),
            aggregates=OutputTopic(topics.aggregates, limit, _assistant_key),
            hopping=OutputTopic(settings.window.hopping_topic, limit, _assistant_key),
            late=OutputTopic(settings.window.late_topic, limit, _assistant_key),
            alerts=OutputTopic(settings.alerts.topic, limit, _alert_key),
            window_state=OutputTopic(window_changelog_topic(settings), limit),
        )


# Module-level functions, not lambdas: the topics pickle into the judge's own process.


def _answer_key(model: Verdict | Flag | AuditRecord) -> bytes:
    return model.answer_id.encode()


def _assistant_key(model: AnswerOutcome | WindowAggregate) -> bytes:
    return model.assistant_id.encode()


def _alert_key(event: AlertEvent) -> bytes:
    return f"{event.tenant}/{event.assistant_id}".encode()
