"""Tumbling event-time windows for per-assistant hallucination rates - pure arithmetic.

The window loop keeps one :class:`WindowState` per (assistant, window) in a changelogged
table, so a worker that dies loses nothing: the next owner of the partition recovers the
open windows. Everything here is deterministic and broker-free, so it is unit-tested
directly.

Closing rule (both on purpose):
- event time: a window closes once the partition's watermark (latest event time seen)
  passes ``end + grace``;
- quiet traffic: a window whose ``end + grace`` has passed on the wall clock closes after
  ``idle_close_s`` wall-clock seconds without new events, so a sparse or replayed stream
  still reports.
Late events (for a window already closed) are never dropped: they revise the window,
which is emitted again with ``revision + 1`` and a ``late_events`` count.
Redelivered events (same ``event_id``) are counted once: the ids counted live in their own
table entries (``window_table.py``), so a window holds counters only and its changelog
record stays the same size however many answers it counts.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict

from streamproc.events import WindowAggregate
from streamproc.stats import wilson_interval

__all__ = [
    "AnswerOutcome",
    "WindowState",
    "add_outcome",
    "close_window",
    "is_due",
    "is_expired",
    "next_check_at",
    "window_key",
    "window_start",
]


class AnswerOutcome(BaseModel):
    """What the window stage needs to know about one judged answer (internal topic)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    assistant_id: str
    tenant: str
    model: str
    occurred_at: AwareDatetime
    hallucinated: bool
    abstained: bool
    contradicted_claims: int
    unsupported_claims: int
    faithfulness: float | None


class WindowState(BaseModel):
    """Running counts of one window; stored as JSON in the window table.

    Fixed size: ``last_event_id`` is the only id kept. It is written in the same record as
    the count, so a crash after this record but before the event's "seen" mark (a later
    record of the same changelog partition) still counts the redelivered event once.
    """

    model_config = ConfigDict(extra="forbid")

    assistant_id: str
    start: float
    end: float
    partition: int
    answers: int = 0
    answered: int = 0
    hallucinated: int = 0
    contradicted_claims: int = 0
    unsupported_claims: int = 0
    abstentions: int = 0
    faithfulness_sum: float = 0.0
    faithfulness_n: int = 0
    last_event_id: str | None = None
    last_update: float = 0.0
    closed_at: float | None = None
    revision: int = -1
    late_events: int = 0
    dirty: bool = True


def window_start(timestamp: float, size_s: float) -> float:
    """Start of the tumbling window that holds ``timestamp`` (epoch seconds)."""
    return math.floor(timestamp / size_s) * size_s


def window_key(assistant_id: str, start: float) -> str:
    """Table key of one window. The ``w|`` prefix keeps window keys apart from the other
    entries of the same table (seen marks, watermarks) whatever the assistant id is."""
    return f"w|{assistant_id}|{int(start * 1000)}"


def add_outcome(
    state: WindowState | None,
    outcome: AnswerOutcome,
    *,
    partition: int,
    size_s: float,
    now: float,
) -> WindowState:
    """Count one outcome into its window (a new state object; the input is not mutated).

    Only a redelivery of the window's last counted event is recognised here; the caller
    checks older ids against the seen marks (see ``window_table.count_outcome``).
    """
    if state is None:
        start = window_start(outcome.occurred_at.timestamp(), size_s)
        state = WindowState(
            assistant_id=outcome.assistant_id, start=start, end=start + size_s, partition=partition
        )
    if outcome.event_id == state.last_event_id:
        return state
    updated = state.model_copy()
    updated.last_event_id = outcome.event_id
    updated.answers += 1
    if outcome.abstained:
        updated.abstentions += 1
    else:
        updated.answered += 1
        updated.hallucinated += int(outcome.hallucinated)
    updated.contradicted_claims += outcome.contradicted_claims
    updated.unsupported_claims += outcome.unsupported_claims
    if outcome.faithfulness is not None:
        updated.faithfulness_sum += outcome.faithfulness
        updated.faithfulness_n += 1
    if updated.closed_at is not None:
        updated.late_events += 1
    updated.last_update = now
    updated.dirty = True
    return updated


def is_due(
    state: WindowState, *, watermark: float | None, now: float, grace_s: float, idle_s: float
) -> bool:
    """Whether the window should be (re-)emitted now."""
    if not state.dirty:
        return False
    if state.closed_at is not None:
        return True  # a late event revised a closed window: report the correction
    closes_at = state.end + grace_s
    if watermark is not None and watermark >= closes_at:
        return True
    return now >= closes_at and now - state.last_update >= idle_s


def next_check_at(state: WindowState, *, grace_s: float, idle_s: float, retain_s: float) -> float:
    """Earliest wall-clock time at which :func:`is_due` or :func:`is_expired` can turn true
    without a new event (the watermark rule is scheduled separately, at ``end + grace``).

    A new event only moves this later, so a scheduler may keep an earlier time and
    recompute when it comes round.
    """
    if state.closed_at is None:
        return max(state.end + grace_s, state.last_update + idle_s)
    if state.dirty:
        return -math.inf  # a revised window is due at once
    return state.closed_at + retain_s


def close_window(state: WindowState, *, now: float) -> tuple[WindowState, WindowAggregate]:
    """Mark the window emitted and build the aggregate to publish."""
    closed = state.model_copy(
        update={"closed_at": now, "revision": state.revision + 1, "dirty": False}
    )
    interval = wilson_interval(closed.hallucinated, closed.answered)
    aggregate = WindowAggregate(
        assistant_id=closed.assistant_id,
        window_start=_utc(closed.start),
        window_end=_utc(closed.end),
        answers=closed.answers,
        answered=closed.answered,
        hallucinated=closed.hallucinated,
        rate=closed.hallucinated / closed.answered if closed.answered else None,
        rate_low=interval[0] if interval else None,
        rate_high=interval[1] if interval else None,
        contradicted_claims=closed.contradicted_claims,
        unsupported_claims=closed.unsupported_claims,
        abstentions=closed.abstentions,
        mean_faithfulness=(
            closed.faithfulness_sum / closed.faithfulness_n if closed.faithfulness_n else None
        ),
        late_events=closed.late_events,
        revision=closed.revision,
        closed_at=_utc(now),
    )
    return closed, aggregate


def is_expired(state: WindowState, *, now: float, retain_s: float) -> bool:
    """A closed, clean window older than the retention can be forgotten."""
    return state.closed_at is not None and not state.dirty and now - state.closed_at >= retain_s


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
