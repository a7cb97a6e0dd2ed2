"""The window table's layout and the reads and writes the window loop makes.

One changelogged table per outcome partition holds four kinds of entry, told apart by
a key prefix (``<series>`` is ``SeriesKey.text()``, a JSON list):

- ``p|<series>|<pane start ms>``: a :class:`~streamproc.stream.window_panes.Pane`
  (counters, bounded histogram and examples; fixed size);
- ``k|<series>``: a :class:`Series`: how far the series' windows are closed
  (``closed_through``) and sealed (``sealed_through``: panes ending by then take no more
  answers: a later one goes to the late topic), and its clocks as last written;
- ``s|<event_id>``: the seen mark of a counted event, ``[partition, seen_at]``, kept
  ``seen_retain_s`` so a redelivered event counts once;
- ``x|...``: state of the loop's hooks (``window_report.ExtensionState``), left alone.

The life of a series' pane (end ``e``), by the series' own clocks only:

1. open until the series' watermark (latest event time) passes ``e + grace``, or, on the
   wall clock, ``e + grace`` has passed and the series had no event for ``idle_close_s``;
   then it closes with every window that ends by then (each window once, even an empty
   last pane's: a quiet key's last windows close on time);
2. closed: a late answer revises it, and every window holding it is published again
   with a higher revision at the next tick;
3. sealed once the watermark is ``retain_closed_s`` past ``e + grace``, or the series was
   quiet that long: an answer for it now goes to the late topic;
4. deleted once every window holding it is sealed (a hopping window needs its panes
   until then).

Why one table and not a separate dedup table: on a broker without transactions (Tansu),
the records of two changelog topics can reach the broker in any combination when a worker
dies, so a pane update could survive without its seen mark (a double count after
redelivery). Within one changelog partition the log is a prefix of what was written
(the store drains in write order). The pane record is written first and carries
``last_event_id``; its seen mark follows. A crash in between leaves that pane record as
the last one, and ``last_event_id`` recognises the redelivery. On Kafka the window loop
commits the changelog, the aggregates and the input offsets in one transaction, and the
seen marks only guard against a producer that sends the same outcome twice.

Everything here works on any ``MutableMapping``: the window loop passes a
:class:`~streamproc.stream.window_store.TrackedStore`, the tests and the benchmark a dict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, TypedDict

from streamproc.config import WindowSettings
from streamproc.events import WindowAggregate
from streamproc.stream.window_index import PartitionIndex, SeriesRuntime, WindowTiming
from streamproc.stream.window_panes import Pane, WindowTotals, add_outcome, close_pane
from streamproc.stream.window_report import PaneDelta
from streamproc.stream.windows import (
    AnswerOutcome,
    SeriesKey,
    WindowSpec,
    next_window_end,
    pane_ms_of,
    pane_start_ms,
    panes_between,
    window_specs,
)

__all__ = [
    "LEGACY_PREFIXES",
    "PANE_PREFIX",
    "SEEN_PREFIX",
    "SERIES_PREFIX",
    "Closed",
    "Counted",
    "Series",
    "Store",
    "close_due",
    "close_series",
    "count_outcome",
    "drop_legacy_entries",
    "forget_expired_seen",
    "pane_key",
    "rebuild_index",
    "seen_key",
    "series_key",
    "window_timing",
]

PANE_PREFIX: Final = "p|"
SERIES_PREFIX: Final = "k|"
SEEN_PREFIX: Final = "s|"
LEGACY_PREFIXES: Final = ("w|", "m|")
"""Per-assistant windows and per-partition watermarks of the layout before series."""

Store = MutableMapping[str, Any]
"""The window table (JSON-ready values), or a dict standing in for it."""


class Series(TypedDict):
    """A series' marks and its clocks as last written (the panes hold newer clocks)."""

    tenant: str
    assistant_id: str
    model: str
    closed_through: int | None
    sealed_through: int | None
    watermark: float | None
    last_update: float


class Counted(Enum):
    COUNTED = "counted"
    REPEATED = "repeated"
    """Counted before (a redelivery): nothing changed."""
    TOO_LATE = "too_late"
    """Its pane is sealed: the caller writes it to the late topic."""


@dataclass
class Closed:
    """What closing did: aggregates to publish (with their window size) and deltas."""

    aggregates: list[tuple[WindowSpec, WindowAggregate]] = field(default_factory=list)
    deltas: list[PaneDelta] = field(default_factory=list)

    def extend(self, other: Closed) -> None:
        self.aggregates += other.aggregates
        self.deltas += other.deltas


def pane_key(sid: str, start: int) -> str:
    return f"{PANE_PREFIX}{sid}|{start}"


def series_key(sid: str) -> str:
    return f"{SERIES_PREFIX}{sid}"


def seen_key(event_id: str) -> str:
    """Table key of an event's seen mark."""
    return f"{SEEN_PREFIX}{event_id}"


def window_timing(window: WindowSettings, *, max_event_age_s: float) -> WindowTiming:
    """Timings from the settings. A seen mark outlives the ordinary life of the pane that
    counted it: open for a pane (+ grace, + idle when the traffic is replayed), then
    ``retain_closed_s`` closed. A series with no panes is forgotten once no event of a
    window it sealed can pass intake any more (``max_event_age_s``:
    ``worker.event_time_max_past_s``), plus the lateness as margin for events in flight."""
    specs = window_specs(window)
    pane_ms = pane_ms_of(specs)
    return WindowTiming(
        specs=specs,
        pane_ms=pane_ms,
        grace_s=window.grace_s,
        idle_s=window.idle_close_s,
        lateness_s=window.retain_closed_s,
        seen_retain_s=pane_ms / 1000
        + window.grace_s
        + window.idle_close_s
        + window.retain_closed_s,
        forget_s=max_event_age_s + window.retain_closed_s,
        examples=window.examples,
    )


def count_outcome(
    store: Store, index: PartitionIndex, outcome: AnswerOutcome, *, partition: int, now: float
) -> Counted:
    """Count one outcome into its series' pane unless it was counted before or its pane
    is sealed. Writes the pane first, then the seen mark (see above); a too-late outcome
    gets a seen mark too, so a redelivery is not written to the late topic twice."""
    mark = seen_key(outcome.event_id)
    if mark in store:
        return Counted.REPEATED
    timing = index.timing
    sid = SeriesKey.of(outcome).text()
    runtime = index.series.get(sid)
    occurred = outcome.occurred_at.timestamp()
    start = pane_start_ms(occurred, timing.pane_ms)
    end = start + timing.pane_ms
    result = Counted.COUNTED
    if runtime is not None and runtime.sealed_through is not None and end <= runtime.sealed_through:
        result = Counted.TOO_LATE
    else:
        closed = None if runtime is None else runtime.closed_through
        late = closed is not None and end <= closed
        key = pane_key(sid, start)
        pane = add_outcome(
            store.get(key), outcome, start=start, now=now, late=late, examples=timing.examples
        )
        if pane is None:
            result = Counted.REPEATED
        else:
            store[key] = pane
            if runtime is None:
                runtime = index.runtime(sid)
                _write_series(store, sid, runtime)
            index.counted(sid, start, occurred, now, late=late)
    store[mark] = [partition, now]
    index.track_seen(mark, now)
    return result


def close_due(store: Store, index: PartitionIndex, now: float) -> Closed:
    """Close, revise, seal and forget what the index says is due in the partition."""
    closed = Closed()
    for sid in index.due(now):
        closed.extend(close_series(store, index, sid, now))
    return closed


def close_series(store: Store, index: PartitionIndex, sid: str, now: float) -> Closed:
    """One series' turn: report revised panes, close panes and windows whose end + grace
    has passed (by its watermark, or by the wall clock once idle), seal and delete what
    can no longer change, forget the series when nothing is left. Writes nothing when
    nothing changed (an early look)."""
    runtime = index.series[sid]
    timing = index.timing
    old_closed = runtime.closed_through
    new_closed = _closable_through(runtime, timing, now)
    result = Closed()
    to_emit: set[tuple[int, int]] = set()
    for start in sorted(runtime.dirty):  # late answers: revise the pane and its windows
        result.deltas.append(_report_pane(store, runtime, sid, start, timing, revised=True))
        for number, spec in enumerate(timing.specs):
            for end in spec.ends_containing(start, timing.pane_ms):
                if old_closed is not None and end <= old_closed:
                    to_emit.add((number, end))
    runtime.dirty.clear()
    if new_closed is not None and new_closed != old_closed and runtime.panes:
        # The panes ending in (old, new]: starts in [old, new - pane] (all multiples).
        lowest = runtime.panes[0] if old_closed is None else old_closed
        for start in panes_between(runtime.panes, lowest, new_closed - timing.pane_ms + 1):
            result.deltas.append(_report_pane(store, runtime, sid, start, timing, revised=False))
        to_emit |= _windows_ending(runtime.panes, old_closed, new_closed, timing)
    for number, end in sorted(to_emit, key=lambda item: (item[1], item[0])):
        spec = timing.specs[number]
        totals = WindowTotals()
        for start in panes_between(runtime.panes, end - spec.size_ms, end):
            totals.add(store[pane_key(sid, start)], examples=timing.examples)
        result.aggregates.append((spec, totals.aggregate(runtime.key, spec, end, now=now)))
    new_sealed = _sealed_through(runtime, timing, new_closed, now)
    _delete_sealed_panes(store, runtime, sid, new_sealed, timing)
    if (new_closed, new_sealed) != (old_closed, runtime.sealed_through):
        runtime.closed_through, runtime.sealed_through = new_closed, new_sealed
        _write_series(store, sid, runtime)
    runtime.next_end = next_window_end(runtime.panes, new_closed, timing.specs, timing.pane_ms)
    if not runtime.panes and now - runtime.last_update >= timing.forget_s:
        del store[series_key(sid)]
        index.forget(sid)
    else:
        index.schedule(sid)
    return result


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


def rebuild_index(
    items: Iterable[tuple[str, Any]], partition: int, timing: WindowTiming
) -> PartitionIndex:
    """The index of one partition, from the table's entries (one pass, after recovery):
    each series' clocks are the newest of its record's and its panes'."""
    index = PartitionIndex(timing)
    seen: list[tuple[float, str]] = []
    for key, raw in items:
        if key.startswith(PANE_PREFIX):
            sid, _, start = key[len(PANE_PREFIX) :].rpartition("|")
            runtime = index.runtime(sid)
            runtime.panes.append(int(start))
            _advance(runtime, raw["max_event_at"], raw["last_update"])
            if raw["dirty"]:
                runtime.dirty.add(int(start))
        elif key.startswith(SERIES_PREFIX):
            runtime = index.runtime(key[len(SERIES_PREFIX) :])
            runtime.closed_through = raw["closed_through"]
            runtime.sealed_through = raw["sealed_through"]
            _advance(runtime, raw["watermark"], raw["last_update"])
        elif key.startswith(SEEN_PREFIX) and raw[0] == partition:
            seen.append((float(raw[1]), key))
    for seen_at, key in sorted(seen):
        index.track_seen(key, seen_at)
    for sid, runtime in index.series.items():
        runtime.panes.sort()
        runtime.next_end = next_window_end(
            runtime.panes, runtime.closed_through, timing.specs, timing.pane_ms
        )
        index.schedule(sid)
    return index


def drop_legacy_entries(store: Store) -> tuple[int, int]:
    """Delete the entries of the layout before series (per-assistant windows ``w|``, the
    partition watermark ``m|``): they name no tenant or model, so they cannot be carried
    over. Returns (entries deleted, answers in windows that had not closed yet), for the
    log; upgrade with the windows closed (stop producing, wait ``idle_close_s``) to lose
    none."""
    legacy = [key for key in store if key.startswith(LEGACY_PREFIXES)]
    unreported = 0
    for key in legacy:
        raw = store[key]
        if key.startswith("w|") and isinstance(raw, dict) and raw.get("closed_at") is None:
            unreported += int(raw.get("answers", 0))
        del store[key]
    return len(legacy), unreported


def _advance(runtime: SeriesRuntime, event_time: float | None, wall: float) -> None:
    if event_time is not None and (runtime.watermark is None or event_time > runtime.watermark):
        runtime.watermark = event_time
    runtime.last_update = max(runtime.last_update, wall)


def _closable_through(runtime: SeriesRuntime, timing: WindowTiming, now: float) -> int | None:
    """The latest pane end the series may be closed through now."""
    grace_ms = timing.grace_s * 1000
    candidates = [runtime.closed_through]
    if runtime.watermark is not None:
        candidates.append(_floor_ms(runtime.watermark * 1000 - grace_ms, timing.pane_ms))
    if now - runtime.last_update >= timing.idle_s:
        candidates.append(_floor_ms(now * 1000 - grace_ms, timing.pane_ms))
    known = [value for value in candidates if value is not None]
    return max(known) if known else None


def _sealed_through(
    runtime: SeriesRuntime, timing: WindowTiming, closed: int | None, now: float
) -> int | None:
    """The latest pane end the series may be sealed through now (never past closed)."""
    if closed is None:
        return runtime.sealed_through
    candidates = [runtime.sealed_through]
    if runtime.watermark is not None:
        behind_ms = (timing.grace_s + timing.lateness_s) * 1000
        candidates.append(_floor_ms(runtime.watermark * 1000 - behind_ms, timing.pane_ms))
    if now - runtime.last_update >= timing.lateness_s:
        candidates.append(closed)  # quiet for the whole lateness: nothing more is coming
    known = [value for value in candidates if value is not None]
    return min(closed, max(known)) if known else None


def _windows_ending(
    panes: list[int], after: int | None, through: int, timing: WindowTiming
) -> set[tuple[int, int]]:
    """(size number, end) of every window ending in ``(after, through]`` that holds a
    pane; only ends from the first pane's to the last pane's windows are looked at."""
    found: set[tuple[int, int]] = set()
    for number, spec in enumerate(timing.specs):
        lowest = panes[0] + timing.pane_ms
        if after is not None:
            lowest = max(lowest, after + 1)
        first = -(-lowest // spec.hop_ms) * spec.hop_ms
        last = min(through, (panes[-1] + spec.size_ms) // spec.hop_ms * spec.hop_ms)
        for end in range(first, last + 1, spec.hop_ms):
            if panes_between(panes, end - spec.size_ms, end):
                found.add((number, end))
    return found


def _delete_sealed_panes(
    store: Store, runtime: SeriesRuntime, sid: str, sealed: int | None, timing: WindowTiming
) -> None:
    """Delete the oldest panes whose every window ends by ``sealed`` (final)."""
    if sealed is None:
        return
    panes = runtime.panes
    gone = 0
    while gone < len(panes) and _last_window_end(panes[gone], timing) <= sealed:
        del store[pane_key(sid, panes[gone])]
        gone += 1
    del panes[:gone]


def _last_window_end(start: int, timing: WindowTiming) -> int:
    return max((start + spec.size_ms) // spec.hop_ms * spec.hop_ms for spec in timing.specs)


def _report_pane(
    store: Store,
    runtime: SeriesRuntime,
    sid: str,
    start: int,
    timing: WindowTiming,
    *,
    revised: bool,
) -> PaneDelta:
    """Mark one pane reported (first close or revision) and say what changed."""
    key = pane_key(sid, start)
    pane: Pane = store[key]
    closed, answered, hallucinated = close_pane(pane, revised=revised)
    store[key] = closed
    series = runtime.key
    return PaneDelta(
        tenant=series.tenant,
        assistant_id=series.assistant_id,
        model=series.model,
        start=start / 1000,
        end=(start + timing.pane_ms) / 1000,
        answered=answered,
        hallucinated=hallucinated,
        revision=closed["revision"],
        example_answer_ids=tuple(closed["examples"]),
    )


def _write_series(store: Store, sid: str, runtime: SeriesRuntime) -> None:
    key = runtime.key
    store[series_key(sid)] = Series(
        tenant=key.tenant,
        assistant_id=key.assistant_id,
        model=key.model,
        closed_through=runtime.closed_through,
        sealed_through=runtime.sealed_through,
        watermark=runtime.watermark,
        last_update=runtime.last_update,
    )


def _floor_ms(value_ms: float, step: int) -> int:
    return math.floor(value_ms / step) * step
