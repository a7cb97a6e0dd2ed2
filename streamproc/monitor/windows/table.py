"""The window table's layout and the reads and writes the window loop makes.

One changelogged table per outcome partition holds four kinds of entry, told apart by
a key prefix (``<series>`` is ``SeriesKey.text()``, a JSON list):

- ``p|<series>|<pane start ms>``: a :class:`~streamproc.monitor.windows.panes.Pane`
  (counters, bounded histogram and examples; fixed size; a JSON list on the changelog);
- ``k|<series>``: a :class:`Series`: its three marks (pane ends, epoch ms) and its clocks
  as last written;
- ``s|["<tenant>","<event_id>"]``: the seen mark of a counted event, ``[partition,
  seen_at]``, kept ``seen_retain_s`` so a redelivered event counts once (event ids are
  each tenant's own: another tenant's event of the same id is counted; marks of the
  earlier ``s|<event_id>`` layout are only swept);
- ``x|...``: state of the loop's hooks (``window_report.ExtensionState``), left alone.

Each series runs on its own clocks only - its watermark (latest event time counted) and
its last wall-clock update - so one series' traffic never closes, revises or seals
another's windows. Its marks:

- ``closed_through`` C: panes ending by C are closed and reported. C follows the
  watermark - grace; once the series had no event for ``idle_close_s``, the wall clock
  - grace too, but only up to its last pane's end (a replay that pauses goes on with
  fresh panes, not late ones). An answer for a closed pane is *late*: it revises it.
- ``emitted_through`` E >= C: every window ending by E that holds a pane was published
  (a window is published once it ends by C, or - for a quiet series - once its end +
  grace has passed on the wall clock: a quiet key's last windows, tumbling and hopping,
  close on time). A window is published again when a pane of it is revised or a new
  pane of it closes.
- ``sealed_through`` S <= E: panes ending by S take no more answers; a later one goes to
  the late topic. S follows the watermark - grace - ``retain_closed_s`` (capped at C);
  a series quiet for ``retain_closed_s`` on the wall clock is sealed through E. A pane
  is deleted once every window holding it ends by S: no window it is in can change.

A window's revision is ``(panes with answers - 1) + the sum of their revisions``: it
grows by at least one each time the window is published again (a pane revised: + 1; a
new pane: + 1), so the highest revision is the truth. A tumbling window of one pane is
published with 0, then 1, 2, ...

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
:class:`~streamproc.kafka.store.TrackedStore`, the tests and the benchmark a dict.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, TypedDict

from streamproc.contracts.events import AnswerOutcome, WindowAggregate
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex, SeriesRuntime, WindowTiming
from streamproc.monitor.windows.panes import (
    LiveCells,
    Pane,
    WindowTotals,
    add_outcome,
    close_pane,
)
from streamproc.monitor.windows.report import PaneDelta
from streamproc.monitor.windows.spec import (
    SeriesKey,
    WindowSpec,
    next_window_end,
    pane_ms_of,
    pane_start_ms,
    panes_between,
    window_specs,
)
from streamproc.rates.judge_accuracy import JudgeAccuracy

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
    "decode_entries",
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
    emitted_through: int | None
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


def seen_key(tenant: str, event_id: str) -> str:
    """Table key of an event's seen mark: a JSON list, so no id can forge another's."""
    return SEEN_PREFIX + json.dumps([tenant, event_id], separators=(",", ":"), ensure_ascii=False)


def window_timing(
    window: WindowSettings,
    *,
    max_event_age_s: float,
    accuracy: JudgeAccuracy | None = None,
    live: LiveCells | None = None,
) -> WindowTiming:
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
        accuracy=accuracy,
        live=live,
    )


def count_outcome(
    store: Store, index: PartitionIndex, outcome: AnswerOutcome, *, partition: int, now: float
) -> Counted:
    """Count one outcome into its series' pane unless it was counted before or its pane
    is sealed. Writes the pane first, then the seen mark (see above); a too-late outcome
    gets a seen mark too, so a redelivery is not written to the late topic twice."""
    mark = seen_key(outcome.tenant, outcome.event_id)
    if mark in store:
        return Counted.REPEATED
    timing = index.timing
    sid = SeriesKey.of(outcome).text()
    runtime = index.series.get(sid)
    occurred = outcome.occurred_at.timestamp()
    start = pane_start_ms(occurred, timing.pane_ms)
    end = start + timing.pane_ms
    result = Counted.COUNTED
    if runtime is not None and _too_late(runtime, timing, end, now):
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
            store[key] = pane  # changed in place: this marks it for the changelog
            if runtime is None:
                runtime = index.runtime(sid)
                _write_series(store, sid, runtime)
            index.counted(sid, start, occurred, now, late=late)
    store[mark] = [partition, now]
    index.track_seen(mark, now)
    return result


def close_due(
    store: Store, index: PartitionIndex, now: float, *, limit: int | None = None
) -> Closed:
    """Close, revise, seal and forget what the index says is due in the partition, for
    at most ``limit`` series (``index.more_due`` says whether some are left)."""
    closed = Closed()
    for sid in index.due(now, limit):
        closed.extend(close_series(store, index, sid, now))
    return closed


def close_series(store: Store, index: PartitionIndex, sid: str, now: float) -> Closed:
    """One series' turn: report revised and newly closed panes, publish the windows that
    ended or changed, seal and delete what can no longer change, forget the series when
    nothing is left (see the module docstring). Writes nothing when nothing changed (an
    early look)."""
    runtime = index.series[sid]
    timing = index.timing
    marks = (runtime.closed_through, runtime.emitted_through, runtime.sealed_through)
    old_closed, old_emitted, _ = marks
    new_closed, new_emitted = _closable_through(runtime, timing, now)
    result = Closed()
    to_emit: set[tuple[int, int]] = set()
    for start in sorted(runtime.dirty):  # late answers: revise the pane and its windows
        result.deltas.append(_report_pane(store, runtime, sid, start, timing))
        to_emit |= _published_windows_holding(start, old_emitted, timing)
    runtime.dirty.clear()
    if new_closed is not None and new_closed != old_closed and runtime.panes:
        # The panes ending in (old, new]: starts in [old, new - pane] (all multiples).
        lowest = runtime.panes[0] if old_closed is None else old_closed
        for start in panes_between(runtime.panes, lowest, new_closed - timing.pane_ms + 1):
            result.deltas.append(_report_pane(store, runtime, sid, start, timing))
            to_emit |= _published_windows_holding(start, old_emitted, timing)
    if new_emitted is not None and new_emitted != old_emitted and runtime.panes:
        to_emit |= _windows_ending(runtime.panes, old_emitted, new_emitted, timing)
    for number, end in sorted(to_emit, key=lambda item: (item[1], item[0])):
        spec = timing.specs[number]
        totals = WindowTotals()
        for start in panes_between(runtime.panes, end - spec.size_ms, end):
            totals.add(store[pane_key(sid, start)], examples=timing.examples)
        aggregate = totals.aggregate(
            runtime.key, spec, end, now=now, accuracy=timing.accuracy, live=timing.live
        )
        result.aggregates.append((spec, aggregate))
    runtime.closed_through, runtime.emitted_through = new_closed, new_emitted
    runtime.sealed_through = _sealed_through(runtime, timing, now)
    _delete_sealed_panes(store, runtime, sid, timing)
    if (runtime.closed_through, runtime.emitted_through, runtime.sealed_through) != marks:
        _write_series(store, sid, runtime)
    runtime.next_end = _next_end(runtime, timing)
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
            _advance(runtime, raw.max_event_at, raw.last_update)
            if raw.dirty:
                runtime.dirty.add(int(start))
        elif key.startswith(SERIES_PREFIX):
            runtime = index.runtime(key[len(SERIES_PREFIX) :])
            runtime.closed_through = raw["closed_through"]
            runtime.emitted_through = raw["emitted_through"]
            runtime.sealed_through = raw["sealed_through"]
            _advance(runtime, raw["watermark"], raw["last_update"])
        elif key.startswith(SEEN_PREFIX) and raw[0] == partition:
            seen.append((float(raw[1]), key))
    for seen_at, key in sorted(seen):
        index.track_seen(key, seen_at)
    for sid, runtime in index.series.items():
        runtime.panes.sort()
        runtime.next_end = _next_end(runtime, timing)
        index.schedule(sid)
    return index


def decode_entries(entries: dict[str, Any]) -> dict[str, Any]:
    """The table as restored from its changelog (JSON values), with each pane made a
    :class:`~streamproc.monitor.windows.panes.Pane` again (in place; returned)."""
    for key, value in entries.items():
        if key.startswith(PANE_PREFIX):
            entries[key] = Pane.from_json(value)
    return entries


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


def _closable_through(
    runtime: SeriesRuntime, timing: WindowTiming, now: float
) -> tuple[int | None, int | None]:
    """The closed and emitted marks the series may have now (see the module docstring)."""
    grace_ms = timing.grace_s * 1000
    closed = [runtime.closed_through]
    emitted = [runtime.emitted_through]
    if runtime.watermark is not None:
        closed.append(_floor_ms(runtime.watermark * 1000 - grace_ms, timing.pane_ms))
    if runtime.panes and now - runtime.last_update >= timing.idle_s:
        wall = _floor_ms(now * 1000 - grace_ms, timing.pane_ms)
        closed.append(min(wall, runtime.panes[-1] + timing.pane_ms))
        emitted.append(min(wall, _last_window_end(runtime.panes[-1], timing)))
    new_closed = _latest(closed)
    emitted.append(new_closed)
    return new_closed, _latest(emitted)


def _too_late(runtime: SeriesRuntime, timing: WindowTiming, pane_end: int, now: float) -> bool:
    """Whether a pane takes no more answers: sealed, or due to be at the next look (so
    the answer's fate does not depend on when the last tick was)."""
    if runtime.sealed_through is not None and pane_end <= runtime.sealed_through:
        return True
    behind_ms = (timing.grace_s + timing.lateness_s) * 1000
    if runtime.watermark is not None and pane_end <= runtime.watermark * 1000 - behind_ms:
        return True
    emitted = runtime.emitted_through
    quiet = now - runtime.last_update >= timing.lateness_s
    return quiet and emitted is not None and pane_end <= emitted


def _sealed_through(runtime: SeriesRuntime, timing: WindowTiming, now: float) -> int | None:
    """The sealed mark the series may have now (never past closed, or emitted when quiet)."""
    sealed = [runtime.sealed_through]
    if runtime.watermark is not None and runtime.closed_through is not None:
        behind_ms = (timing.grace_s + timing.lateness_s) * 1000
        by_event_time = _floor_ms(runtime.watermark * 1000 - behind_ms, timing.pane_ms)
        sealed.append(min(runtime.closed_through, by_event_time))
    if now - runtime.last_update >= timing.lateness_s:
        sealed.append(runtime.emitted_through)  # quiet for the whole lateness
    return _latest(sealed)


def _next_end(runtime: SeriesRuntime, timing: WindowTiming) -> int | None:
    """The earliest pane end past closed or window end past emitted with a pane in it."""
    ends = [next_window_end(runtime.panes, runtime.emitted_through, timing.specs, timing.pane_ms)]
    panes, closed = runtime.panes, runtime.closed_through
    first_open = 0 if closed is None else bisect_right(panes, closed - timing.pane_ms)
    if first_open < len(panes):
        ends.append(panes[first_open] + timing.pane_ms)
    known = [end for end in ends if end is not None]
    return min(known) if known else None


def _published_windows_holding(
    start: int, emitted: int | None, timing: WindowTiming
) -> set[tuple[int, int]]:
    """(size number, end) of the windows holding the pane that were published already."""
    if emitted is None:
        return set()
    return {
        (number, end)
        for number, spec in enumerate(timing.specs)
        for end in spec.ends_containing(start, timing.pane_ms)
        if end <= emitted
    }


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
    store: Store, runtime: SeriesRuntime, sid: str, timing: WindowTiming
) -> None:
    """Delete the oldest panes whose every window ends by the sealed mark (final)."""
    sealed = runtime.sealed_through
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
    store: Store, runtime: SeriesRuntime, sid: str, start: int, timing: WindowTiming
) -> PaneDelta:
    """Mark one pane reported (first close or revision) and say what changed."""
    key = pane_key(sid, start)
    pane: Pane = store[key]
    answered, hallucinated = close_pane(pane)
    store[key] = pane
    series = runtime.key
    return PaneDelta(
        tenant=series.tenant,
        assistant_id=series.assistant_id,
        model=series.model,
        start=start / 1000,
        end=(start + timing.pane_ms) / 1000,
        answered=answered,
        hallucinated=hallucinated,
        revision=pane.revision,
        example_answer_ids=pane.examples,
    )


def _write_series(store: Store, sid: str, runtime: SeriesRuntime) -> None:
    key = runtime.key
    store[series_key(sid)] = Series(
        tenant=key.tenant,
        assistant_id=key.assistant_id,
        model=key.model,
        closed_through=runtime.closed_through,
        emitted_through=runtime.emitted_through,
        sealed_through=runtime.sealed_through,
        watermark=runtime.watermark,
        last_update=runtime.last_update,
    )


def _floor_ms(value_ms: float, step: int) -> int:
    return math.floor(value_ms / step) * step


def _latest(marks: list[int | None]) -> int | None:
    known = [mark for mark in marks if mark is not None]
    return max(known) if known else None
