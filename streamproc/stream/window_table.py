"""The window table's layout and the reads and writes the ``count-windows`` agent makes.

One changelogged table holds three kinds of entry, told apart by a key prefix:

- ``w|<assistant>|<start ms>``: a :class:`~streamproc.stream.windows.WindowState` (counters
  only, fixed size);
- ``s|<event_id>``: the seen mark of a counted event, ``[partition, seen_at]``, kept
  ``seen_retain_s`` (see :func:`index_timing`) so a redelivered event counts once;
- ``m|<partition>``: the partition's event-time watermark, so a restarted or rebalanced
  worker resumes with it instead of closing windows only by the idle rule.

Why one table and not a separate dedup table: on a broker without transactions (Tansu),
the records of two changelog topics can reach the broker in any combination when a worker
dies, so a window update could survive without its seen mark (a double count after
redelivery). Within one changelog partition the log is a prefix of what was written. The
window record is written first and carries ``last_event_id``; its seen mark follows. A
crash in between leaves that window record as the last one of the partition, and
``last_event_id`` recognises the redelivery. On Kafka the window loop commits the
changelog, the aggregates and the input offsets in one transaction, and the seen marks
only guard against a producer that sends the same outcome twice.

Each outcome partition has its own store and its own changelog partition: the outcomes
topic is keyed by assistant, so each assistant's windows, seen marks and the partition's
watermark all live in that partition.

Everything here works on any ``MutableMapping``: the window loop passes a
:class:`~streamproc.stream.window_store.TrackedStore`, the tests and the benchmark a dict.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from streamproc.config import WindowSettings
from streamproc.stream.window_index import IndexTiming, PartitionIndex
from streamproc.stream.windows import (
    AnswerOutcome,
    WindowState,
    add_outcome,
    is_due,
    is_expired,
    window_key,
    window_start,
)

__all__ = [
    "SEEN_PREFIX",
    "WATERMARK_PREFIX",
    "WINDOW_PREFIX",
    "Store",
    "count_outcome",
    "forget_expired_seen",
    "index_timing",
    "mark_closed",
    "persist_watermark",
    "rebuild_index",
    "seen_key",
    "watermark_key",
    "windows_to_close",
]

WINDOW_PREFIX = "w|"
SEEN_PREFIX = "s|"
WATERMARK_PREFIX = "m|"

Store = MutableMapping[str, Any]
"""The window table (JSON-ready values), or a dict standing in for it."""


def seen_key(event_id: str) -> str:
    """Table key of an event's seen mark."""
    return f"{SEEN_PREFIX}{event_id}"


def watermark_key(partition: int) -> str:
    """Table key of a partition's watermark."""
    return f"{WATERMARK_PREFIX}{partition}"


def index_timing(window: WindowSettings) -> IndexTiming:
    """Schedule timings from the settings. A seen mark outlives the longest ordinary life
    of the window that counted it: open for ``size`` (+ ``grace``, + ``idle`` when the
    traffic is replayed), then ``retain_closed_s`` closed."""
    return IndexTiming(
        grace_s=window.grace_s,
        idle_s=window.idle_close_s,
        retain_s=window.retain_closed_s,
        seen_retain_s=window.size_s + window.grace_s + window.idle_close_s + window.retain_closed_s,
    )


def count_outcome(
    store: Store,
    index: PartitionIndex,
    outcome: AnswerOutcome,
    *,
    partition: int,
    size_s: float,
    now: float,
) -> WindowState | None:
    """Count one outcome into its window unless it was counted before; the new window state,
    or None for a redelivery. Writes the window first, then the seen mark (see above)."""
    index.observe_event_time(outcome.occurred_at.timestamp())
    mark = seen_key(outcome.event_id)
    if mark in store:
        return None
    key = window_key(outcome.assistant_id, window_start(outcome.occurred_at.timestamp(), size_s))
    raw = store.get(key)
    previous = None if raw is None else WindowState.model_validate(raw)
    state = add_outcome(previous, outcome, partition=partition, size_s=size_s, now=now)
    counted = state is not previous
    if counted:
        store[key] = state.model_dump(mode="json")
        index.track_window(key, state)
    store[mark] = [partition, now]
    index.track_seen(mark, now)
    return state if counted else None


def windows_to_close(
    store: Store, index: PartitionIndex, now: float
) -> list[tuple[str, WindowState]]:
    """The partition's windows due now. Looks only at the index's candidates: deletes the
    expired ones and re-schedules those not due yet. The caller publishes each due
    window's aggregate and then calls :func:`mark_closed`."""
    timing = index.timing
    due: list[tuple[str, WindowState]] = []
    for key in index.window_candidates(now):
        raw = store.get(key)
        if raw is None:
            continue  # deleted since it was scheduled
        state = WindowState.model_validate(raw)
        if is_due(
            state,
            watermark=index.watermark,
            now=now,
            grace_s=timing.grace_s,
            idle_s=timing.idle_s,
        ):
            due.append((key, state))
        elif is_expired(state, now=now, retain_s=timing.retain_s):
            del store[key]
        else:
            index.track_window(key, state)
    return due


def mark_closed(store: Store, index: PartitionIndex, key: str, closed: WindowState) -> None:
    """Store a window whose aggregate the broker has, and schedule its expiry."""
    store[key] = closed.model_dump(mode="json")
    index.track_window(key, closed)


def forget_expired_seen(store: Store, index: PartitionIndex, now: float) -> int:
    """Delete the seen marks past their retention; how many were deleted. A mark written
    again later (a redelivery after expiry) is left alone."""
    forgotten = 0
    for key, seen_at in index.expired_seen(now):
        raw = store.get(key)
        if raw is not None and raw[1] == seen_at:
            del store[key]
            forgotten += 1
    return forgotten


def persist_watermark(store: Store, index: PartitionIndex, partition: int) -> None:
    """Write the partition's watermark if it moved since it was last written."""
    if index.watermark is not None and index.watermark != index.persisted_watermark:
        store[watermark_key(partition)] = index.watermark
        index.persisted_watermark = index.watermark


def rebuild_index(
    items: Iterable[tuple[str, Any]], partition: int, timing: IndexTiming
) -> PartitionIndex:
    """The index of one partition, from the table's entries (one pass, after recovery)."""
    index = PartitionIndex(timing)
    seen: list[tuple[float, str]] = []
    mine = watermark_key(partition)
    for key, raw in items:
        if key.startswith(WINDOW_PREFIX):
            if raw.get("partition") == partition:
                index.track_window(key, WindowState.model_validate(raw))
        elif key.startswith(SEEN_PREFIX):
            if raw[0] == partition:
                seen.append((float(raw[1]), key))
        elif key == mine:
            index.watermark = index.persisted_watermark = float(raw)
    for seen_at, key in sorted(seen):
        index.track_seen(key, seen_at)
    return index
