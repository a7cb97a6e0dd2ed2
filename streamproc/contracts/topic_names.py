"""Every topic streamproc reads or writes, by name: part of the contract with the
producers and consumers around it (the AsyncAPI document names them), and what the
judging stage, the loops and the topic creation must agree on.

The composition root reads the names from the settings once
(:func:`streamproc.wiring.topic_names`); the defaults here are the settings' defaults
(a test holds them equal), which is what the generated documents show.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "TopicNames",
    "accuracy_changelog_topic",
    "judge_dedup_changelog_topic",
    "labels_changelog_topic",
    "window_changelog_topic",
]


def window_changelog_topic(app_id: str) -> str:
    """The compacted topic holding the window loop's state, partitioned like the outcomes."""
    return f"{app_id}.window-state-changelog"


def labels_changelog_topic(app_id: str) -> str:
    """The labels loop's state (review items waiting for labels), partitioned like the
    review queue."""
    return f"{app_id}.labels-state-changelog"


def accuracy_changelog_topic(app_id: str) -> str:
    """The accuracy loop's state (tallies per cell), partitioned like the label deltas."""
    return f"{app_id}.accuracy-state-changelog"


def judge_dedup_changelog_topic(app_id: str) -> str:
    """The judging loop's (tenant, event_id) marks, partitioned like the answers."""
    return f"{app_id}.judge-dedup-changelog"


@dataclass(frozen=True, slots=True)
class TopicNames:
    """The name of every topic, and the app id that names the consumer groups and the
    loops' changelogs. Each field's docstring names the setting it comes from."""

    app_id: str = "streamproc"
    """``app_id``."""
    answers: str = "assistant.answers"
    """``topics.answers``."""
    verdicts: str = "groundedness.verdicts"
    """``topics.verdicts``."""
    flags: str = "groundedness.flags"
    """``topics.flags``."""
    aggregates: str = "groundedness.aggregates"
    """``topics.aggregates``: the tumbling windows."""
    dead_letter: str = "groundedness.dead-letter"
    """``topics.dead_letter``."""
    outcomes: str = "streamproc.answer-outcomes"
    """``topics.outcomes``."""
    hopping: str = "groundedness.hopping-aggregates"
    """``window.hopping_topic``."""
    late: str = "groundedness.late-events"
    """``window.late_topic``."""
    alerts: str = "groundedness.alerts"
    """``alerts.topic``."""
    audit: str = "streamproc.audit"
    """``audit.topic``."""
    audit_checkpoints: str = "streamproc.audit.checkpoints"
    """``audit.checkpoint_topic``."""
    review_queue: str = "groundedness.review-queue"
    """``review.queue_topic``."""
    labels: str = "groundedness.labels"
    """``review.labels_topic``."""
    label_deltas: str = "streamproc.label-deltas"
    """``labels.deltas_topic``."""
    judge_accuracy: str = "groundedness.judge-accuracy"
    """``labels.accuracy_topic``."""
    gate_requests: str = "groundedness.gate-requests"
    """``gate.requests_topic``."""
    gate_replies: str = "groundedness.gate-replies"
    """``gate.replies_topic``."""

    @property
    def window_changelog(self) -> str:
        return window_changelog_topic(self.app_id)

    @property
    def labels_changelog(self) -> str:
        return labels_changelog_topic(self.app_id)

    @property
    def accuracy_changelog(self) -> str:
        return accuracy_changelog_topic(self.app_id)

    @property
    def judge_dedup_changelog(self) -> str:
        return judge_dedup_changelog_topic(self.app_id)

    def group(self, loop: str) -> str:
        """The consumer group of the loop ``loop`` (``judge``, ``windows``, ...)."""
        return f"{self.app_id}.{loop}"
