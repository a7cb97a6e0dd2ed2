"""Which series and seen marks of one partition need attention when - derived, in memory.

A tick must not scan the whole window table: it asks a :class:`PartitionIndex` for the
few series whose time has come. The index is never the source of truth; it only says
"look at this series now", and the caller decides from the stored state
(``window_table.close_series``). So a stale or early entry costs one look, never a
wrong close, and the index can be dropped and rebuilt from the table at any time (after
a rebalance).

Per series it keeps a :class:`SeriesRuntime`: the series' event-time watermark and last
wall-clock update (derived from its panes), copies of its closed/emitted/sealed marks,
the sorted starts of its live panes and the earliest pane or window end still to close
or emit. Then:

- "due now": a series whose watermark passed its next window end + grace when an event
  was counted, or that has a revised (late) pane;
- wall clock: ``(time, series)``, one live entry per series (idle close, sealing after a
  quiet ``retain_closed_s``, forgetting a series with no panes left), re-armed lazily:
  an entry whose time was superseded by an earlier push is skipped when it comes round;
- seen marks in the order they were written, popped from the head when they expire.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field

from streamproc.monitor.windows.panes import LiveCells
from streamproc.monitor.windows.spec import SeriesKey, WindowSpec, first_end_after
from streamproc.rates.judge_accuracy import JudgeAccuracy

__all__ = ["PartitionIndex", "SeriesRuntime", "WindowTiming"]


@dataclass(frozen=True, slots=True)
class WindowTiming:
    """The window settings the schedule and the table depend on (seconds, panes in ms)."""

    specs: tuple[WindowSpec, ...]
    pane_ms: int
    grace_s: float
    idle_s: float
    lateness_s: float
    seen_retain_s: float
    forget_s: float
    """A series with no panes left is forgotten after this long without events: long
    enough that no event for a window it sealed can still pass intake."""
    examples: int
    accuracy: JudgeAccuracy | None = None
    """The judge's measured accuracy per task type, for the aggregates' corrected rate."""
    live: LiveCells | None = None
    """The deployment's live accuracy per cell, preferred where a cell has enough labels."""


@dataclass(slots=True)
class SeriesRuntime:
    """What the schedule knows of one series (rebuilt from the table on restore)."""

    key: SeriesKey
    watermark: float | None = None
    last_update: float = 0.0
    closed_through: int | None = None
    emitted_through: int | None = None
    sealed_through: int | None = None
    panes: list[int] = field(default_factory=list)
    dirty: set[int] = field(default_factory=set)
    next_end: int | None = None
    """The earliest pane end or window end still to close or emit (epoch ms)."""


@dataclass
class PartitionIndex:
    """Schedule of one outcome partition's series and seen marks."""

    timing: WindowTiming
    series: dict[str, SeriesRuntime] = field(default_factory=dict)
    _due: dict[str, None] = field(default_factory=dict)
    _by_wall_clock: list[tuple[float, str]] = field(default_factory=list)
    _wall_time: dict[str, float] = field(default_factory=dict)
    _seen: deque[tuple[float, str]] = field(default_factory=deque)

    def runtime(self, sid: str) -> SeriesRuntime:
        """The series' runtime, created (empty) on first use."""
        found = self.series.get(sid)
        if found is None:
            found = self.series[sid] = SeriesRuntime(SeriesKey.parse(sid))
        return found

    def counted(
        self, sid: str, pane_start: int, occurred: float, now: float, *, late: bool
    ) -> None:
        """An outcome was counted into the series' pane: advance its clocks and
        schedule it. Cheap enough for every event."""
        runtime = self.runtime(sid)
        if runtime.watermark is None or occurred > runtime.watermark:
            runtime.watermark = occurred
        runtime.last_update = max(runtime.last_update, now)
        self.add_pane(runtime, pane_start)
        if late:
            runtime.dirty.add(pane_start)
        self.schedule(sid)

    def add_pane(self, runtime: SeriesRuntime, pane_start: int) -> None:
        """Remember a live pane (no-op if known) and what it changes in the next end."""
        panes = runtime.panes
        at = bisect_left(panes, pane_start)
        if at < len(panes) and panes[at] == pane_start:
            return
        panes.insert(at, pane_start)
        timing = self.timing
        ends = [first_end_after(pane_start, runtime.emitted_through, timing.specs, timing.pane_ms)]
        pane_end = pane_start + timing.pane_ms
        if runtime.closed_through is None or pane_end > runtime.closed_through:
            ends.append(pane_end)
        for end in ends:
            if end is not None and (runtime.next_end is None or end < runtime.next_end):
                runtime.next_end = end

    def schedule(self, sid: str) -> None:
        """Queue the series for when it next needs a look (see the module docstring)."""
        runtime = self.series[sid]
        timing = self.timing
        grace_ms = timing.grace_s * 1000
        if runtime.dirty or (
            runtime.next_end is not None
            and runtime.watermark is not None
            and runtime.watermark * 1000 >= runtime.next_end + grace_ms
        ):
            self._due[sid] = None
            return
        at = math.inf
        if runtime.next_end is not None:
            at = max((runtime.next_end + grace_ms) / 1000, runtime.last_update + timing.idle_s)
        if runtime.panes and runtime.sealed_through != runtime.emitted_through:
            at = min(at, runtime.last_update + timing.lateness_s)
        if not runtime.panes:
            at = min(at, runtime.last_update + timing.forget_s)
        if at == math.inf:
            return
        queued = self._wall_time.get(sid)
        if queued is None or at < queued:
            self._wall_time[sid] = at
            heapq.heappush(self._by_wall_clock, (at, sid))

    def forget(self, sid: str) -> None:
        """Drop a series (its last entry left the table)."""
        self.series.pop(sid, None)
        self._wall_time.pop(sid, None)
        self._due.pop(sid, None)

    def due(self, now: float, limit: int | None = None) -> list[str]:
        """Pop the series that may need closing, revising, sealing or forgetting now
        (each once), at most ``limit`` of them: the rest stay queued for the next call
        (see :meth:`more_due`). The caller must :meth:`schedule` every one it keeps."""
        room = math.inf if limit is None else limit
        keys: dict[str, None] = {}
        pending = self._due
        while pending and len(keys) < room:
            sid = next(iter(pending))
            del pending[sid]
            keys[sid] = None
        wall_queue = self._by_wall_clock
        while wall_queue and wall_queue[0][0] <= now and len(keys) < room:
            at, sid = heapq.heappop(wall_queue)
            if self._wall_time.get(sid) == at:  # otherwise superseded by an earlier push
                del self._wall_time[sid]
                keys[sid] = None
        return [sid for sid in keys if sid in self.series]

    def more_due(self, now: float) -> bool:
        """Whether a series may be due now (an entry of the wall-clock queue may turn out
        superseded when popped)."""
        return bool(self._due) or bool(self._by_wall_clock and self._by_wall_clock[0][0] <= now)

    def track_seen(self, key: str, seen_at: float) -> None:
        """Remember a seen mark written at ``seen_at`` (wall clock, non-decreasing)."""
        self._seen.append((seen_at, key))

    def expired_seen(self, now: float) -> list[tuple[str, float]]:
        """Pop the seen marks whose retention has passed: ``(key, seen_at)``."""
        expired: list[tuple[str, float]] = []
        seen, cutoff = self._seen, now - self.timing.seen_retain_s
        while seen and seen[0][0] <= cutoff:
            seen_at, key = seen.popleft()
            expired.append((key, seen_at))
        return expired

    def sizes(self) -> tuple[int, int, int]:
        """(series, wall-clock queue, seen marks), for tests and the benchmark."""
        return len(self.series), len(self._by_wall_clock), len(self._seen)
