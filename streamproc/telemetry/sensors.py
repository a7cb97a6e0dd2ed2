"""The hooks the consumer loops call, and what they hand over.

The loops report what they did (a batch published, a dead letter, a window's rate, an
alert's state) to a sensor; metrics (:mod:`streamproc.telemetry.metrics`) implement it.
Neither side imports the other: both import these protocols, as faust's sensors do, so
an exporter can be swapped or added without touching a loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from streamproc.contracts.events import DeadLetter, DeadLetterReason, Flag, Verdict
from streamproc.contracts.label_events import JudgeAccuracyEvent, JudgeDriftAlert, ReviewItem

__all__ = ["AccuracySensor", "JudgingSensor", "PublishedBatch", "WindowSensor"]


class PublishedBatch(Protocol):
    """What one judged micro-batch published (the judging stage's output)."""

    @property
    def verdicts(self) -> Sequence[Verdict]: ...
    @property
    def flags(self) -> Sequence[Flag]: ...
    @property
    def dead_letters(self) -> Sequence[DeadLetter]: ...
    @property
    def repeats(self) -> Sequence[object]: ...
    @property
    def review_items(self) -> Sequence[ReviewItem]:
        """Answers sampled into the review queue."""
        ...


class JudgingSensor(Protocol):
    """What the judging loop reports."""

    def observe_batch(
        self, output: PublishedBatch, *, published_at: datetime | None = None
    ) -> None: ...

    def dead_letter(self, *reasons: DeadLetterReason | str) -> None: ...

    def trace_context_dropped(self, header: str, reason: str) -> None:
        """An input's trace-context field left out for breaking W3C's limits."""
        ...


class WindowSensor(Protocol):
    """What the window loop's hooks report: closed windows' rates, late events, alerts."""

    def window_rate(
        self,
        tenant: str,
        assistant: str,
        model: str,
        window: str,
        rate: float | None,
        low: float | None,
        high: float | None,
        corrected: float | None = None,
    ) -> None: ...

    def late_event(self, tenant: str, assistant: str, model: str) -> None: ...

    def alert_state(self, tenant: str, assistant: str, severity: str, firing: bool) -> None: ...


class AccuracySensor(Protocol):
    """What the labels and accuracy loops report: the judge's live accuracy per cell,
    drift alerts, labels accepted or refused."""

    def accuracy(self, event: JudgeAccuracyEvent) -> None: ...

    def drift(self, alert: JudgeDriftAlert) -> None: ...

    def label(self, outcome: str) -> None:
        """One label handled: ``accepted``, ``duplicate``, ``unknown_answer``,
        ``refused`` or ``invalid``."""
        ...
