"""Which windows and seen marks of one partition need attention when - derived, in memory.

A tick must not scan the whole window table: it asks a :class:`PartitionIndex` for the
few keys whose time has come. The index is never the source of truth; it only says
"look at this key now", and the caller decides from the stored state (``windows.is_due``
/ ``is_expired``). So a stale or duplicate entry costs one lookup, never a wrong close,
and the index can be dropped and rebuilt from the table at any time (after a rebalance).

Three queues per partition:
- event time: ``(end + grace, key)`` of open windows, popped once the watermark passes;
- wall clock: ``(time, key)``, one live entry per window (idle close, a revised window,
  expiry of a closed one), re-armed lazily: a window that saw new events since it was
  scheduled is simply pushed again with its new time when its old time comes round;
- seen marks in the order they were written, popped from the head when they expire.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from streamproc.stream.windows import WindowState, next_check_at

__all__ = ["IndexTiming", "PartitionIndex"]


@dataclass(frozen=True)
class IndexTiming:
    """The window settings the schedule depends on (seconds)."""

    grace_s: float
    idle_s: float
    retain_s: float
    seen_retain_s: float


@dataclass
class PartitionIndex:
    """Schedule of one outcome partition's windows and seen marks, plus its watermark."""

    timing: IndexTiming
    watermark: float | None = None
    persisted_watermark: float | None = None
    _by_event_time: list[tuple[float, str]] = field(default_factory=list)
    _in_event_queue: set[str] = field(default_factory=set)
    _by_wall_clock: list[tuple[float, str]] = field(default_factory=list)
    _wall_time: dict[str, float] = field(default_factory=dict)
    _seen: deque[tuple[float, str]] = field(default_factory=deque)

    def observe_event_time(self, occurred: float) -> None:
        """Advance the watermark (latest event time seen in the partition)."""
        if self.watermark is None or occurred > self.watermark:
            self.watermark = occurred

    def track_window(self, key: str, state: WindowState) -> None:
        """Schedule ``key`` after its state was written; cheap enough for every event."""
        timing = self.timing
        if state.closed_at is None:
            if key not in self._in_event_queue:
                self._in_event_queue.add(key)
                heapq.heappush(self._by_event_time, (state.end + timing.grace_s, key))
            if key in self._wall_time:
                return  # an earlier time is already queued; re-armed when it comes round
        at = next_check_at(
            state, grace_s=timing.grace_s, idle_s=timing.idle_s, retain_s=timing.retain_s
        )
        if self._wall_time.get(key) != at:
            self._wall_time[key] = at
            heapq.heappush(self._by_wall_clock, (at, key))

    def track_seen(self, key: str, seen_at: float) -> None:
        """Remember a seen mark written at ``seen_at`` (wall clock, non-decreasing)."""
        self._seen.append((seen_at, key))

    def window_candidates(self, now: float) -> list[str]:
        """Pop the windows that may be due or expired now (each key once).

        The caller must call :meth:`track_window` again for every candidate it keeps.
        """
        keys: dict[str, None] = {}
        watermark = -math.inf if self.watermark is None else self.watermark
        event_queue = self._by_event_time
        while event_queue and event_queue[0][0] <= watermark:
            _, key = heapq.heappop(event_queue)
            self._in_event_queue.discard(key)
            keys[key] = None
        wall_queue = self._by_wall_clock
        while wall_queue and wall_queue[0][0] <= now:
            at, key = heapq.heappop(wall_queue)
            if self._wall_time.get(key) == at:  # otherwise superseded by a later push
                del self._wall_time[key]
                keys[key] = None
        return list(keys)

    def expired_seen(self, now: float) -> list[tuple[str, float]]:
        """Pop the seen marks whose retention has passed: ``(key, seen_at)``."""
        expired: list[tuple[str, float]] = []
        seen, cutoff = self._seen, now - self.timing.seen_retain_s
        while seen and seen[0][0] <= cutoff:
            seen_at, key = seen.popleft()
            expired.append((key, seen_at))
        return expired

    def sizes(self) -> tuple[int, int, int]:
        """Queue lengths (event time, wall clock, seen), for tests and the benchmark."""
        return len(self._by_event_time), len(self._by_wall_clock), len(self._seen)
