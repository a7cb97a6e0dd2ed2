"""Is the worker making progress on the partitions it owns? Pure bookkeeping.

A consumer can own partitions and still read nothing from them (a stuck fetch, a dead
task, a recovery that never ends), and the group stays Stable, so nobody notices. This
watch remembers, per owned partition, the last offset the worker acknowledged and when
it moved, and is told the partition's end offset now and then. A partition with lag
(end > acknowledged) whose offset has not moved for ``stall_after_s`` is stalled, and a
worker with a stalled partition is not live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from aiokafka.structs import TopicPartition

__all__ = ["PartitionProgress", "ProgressWatch", "partition_lags"]

P = TypeVar("P")


@dataclass(slots=True)
class PartitionProgress:
    """What the watch knows about one owned partition."""

    assigned_at: float
    moved_at: float
    acknowledged: int | None = None
    end: int | None = None

    @property
    def lag(self) -> int | None:
        if self.end is None:
            return None
        return max(0, self.end - (self.acknowledged or 0))


@dataclass(slots=True)
class ProgressWatch(Generic[P]):
    """Per-partition progress of one consumer; partitions are any hashable key."""

    stall_after_s: float
    partitions: dict[P, PartitionProgress] = field(default_factory=dict)

    def assigned(self, partitions: Iterable[P], now: float) -> None:
        self.partitions = {p: PartitionProgress(assigned_at=now, moved_at=now) for p in partitions}

    def revoked(self) -> None:
        self.partitions = {}

    def acknowledged(self, offsets: Mapping[P, int], now: float) -> None:
        """The worker committed ``offsets`` (next offset to read) for these partitions."""
        for partition, offset in offsets.items():
            state = self.partitions.get(partition)
            if state is None:
                continue
            if state.acknowledged is None or offset > state.acknowledged:
                state.acknowledged = offset
                state.moved_at = now

    def committed(self, offsets: Mapping[P, int | None], now: float) -> None:
        """Where the group's committed offsets stand at assignment (no progress yet)."""
        for partition, offset in offsets.items():
            state = self.partitions.get(partition)
            if state is not None and offset is not None and state.acknowledged is None:
                state.acknowledged = offset

    def ends(self, offsets: Mapping[P, int], now: float) -> None:
        """The partitions' end offsets (last stable offset for read_committed)."""
        for partition, end in offsets.items():
            state = self.partitions.get(partition)
            if state is None:
                continue
            had_lag = (state.lag or 0) > 0
            state.end = end
            if not had_lag and (state.lag or 0) > 0:
                state.moved_at = now  # the stall clock starts when work arrives

    def stalled(self, now: float) -> dict[P, PartitionProgress]:
        """Partitions with lag whose acknowledged offset has not moved for too long."""
        return {
            p: s
            for p, s in self.partitions.items()
            if (s.lag or 0) > 0 and now - s.moved_at >= self.stall_after_s
        }

    def total_lag(self) -> int:
        return sum(s.lag or 0 for s in self.partitions.values())


def partition_lags(progress: ProgressWatch[TopicPartition]) -> dict[int, int | None]:
    """A consumer's lag per owned partition number, from its progress watch. A loop that
    reads co-partitioned topics (the labels loop) owns partition N of each: their lags
    add up (None when none is known)."""
    lags: dict[int, int | None] = {}
    for tp, state in progress.partitions.items():
        known = lags.get(tp.partition)
        lags[tp.partition] = state.lag if known is None else known + (state.lag or 0)
    return lags
