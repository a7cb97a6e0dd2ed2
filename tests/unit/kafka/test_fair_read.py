"""FairReader: batches follow the record timestamps across partitions, no partition
starves, and nothing it took is lost when a read fails or a rebalance lands between its
reads (the real-broker test replays a backlog)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import UnsupportedCodecError
from aiokafka.structs import TopicPartition

from streamproc.kafka.fair_read import FairReader

TPS = [TopicPartition("answers", p) for p in range(3)]


class _Record:
    def __init__(self, tp: TopicPartition, offset: int, timestamp: int) -> None:
        self.topic, self.partition, self.offset = tp.topic, tp.partition, offset
        self.timestamp = timestamp


class _Consumer:
    """aiokafka's buffered fetches: per partition, records from a position on."""

    def __init__(
        self, backlog: dict[TopicPartition, int], step_ms: dict[TopicPartition, int] | None = None
    ) -> None:
        self.position = {tp: 0 for tp in backlog}
        self.end = dict(backlog)
        self.step_ms = step_ms or {tp: 1000 for tp in backlog}
        """Record n of a partition has timestamp (n + 1) * step_ms."""
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.on_read: Callable[[tuple[TopicPartition, ...]], None] = lambda _: None

    def assignment(self) -> set[TopicPartition]:
        return set(self.position)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.position[tp] = offset

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int = 500
    ) -> dict[TopicPartition, list[Any]]:
        self.on_read(partitions)
        out: dict[TopicPartition, list[Any]] = {}
        for tp in partitions or sorted(self.position):
            take = min(max_records, self.end[tp] - self.position[tp])
            if take > 0:
                out[tp] = [
                    _Record(tp, o, (o + 1) * self.step_ms[tp])
                    for o in range(self.position[tp], self.position[tp] + take)
                ]
                self.position[tp] += take
                max_records -= take
            if max_records == 0:
                break
        return out


def _as_aiokafka(consumer: _Consumer) -> AIOKafkaConsumer:
    return cast(AIOKafkaConsumer, consumer)


async def test_a_backlog_is_read_in_time_order_across_partitions_of_different_density() -> None:
    steps = {TPS[0]: 1000, TPS[1]: 2000, TPS[2]: 3000}  # an answer every 1, 2, 3 seconds
    consumer = _Consumer({tp: 3000 for tp in TPS}, steps)
    reader = FairReader()
    spreads = []
    for _ in range(100):
        batch, _ = await reader.read(
            _as_aiokafka(consumer), timeout_ms=0, max_records=32, generation=lambda: 0
        )
        assert sum(len(rs) for rs in batch.values()) == 32
        for records in batch.values():  # each partition contiguous, in order
            assert [r.offset for r in records] == list(
                range(records[0].offset, records[0].offset + len(records))
            )
        lasts = [batch[tp][-1].timestamp for tp in TPS if tp in batch]
        spreads.append(max(lasts) - min(lasts))
    # Equal shares would leave partition 2 three times further on in time than partition
    # 0 (hours after 100 batches); led by time, they stay within a few records' steps.
    assert max(spreads) <= 3 * 3000, spreads
    assert consumer.position[TPS[0]] > 2 * consumer.position[TPS[2]]


async def test_a_partition_far_behind_in_time_does_not_starve_the_others() -> None:
    consumer = _Consumer({TPS[0]: 10_000, TPS[1]: 10_000}, {TPS[0]: 1, TPS[1]: 10**9})
    reader = FairReader()
    for _ in range(20):
        batch, _ = await reader.read(
            _as_aiokafka(consumer), timeout_ms=0, max_records=32, generation=lambda: 0
        )
        assert len(batch[TPS[1]]) == 1  # one record each turn, however far ahead
        assert len(batch[TPS[0]]) == 31


async def test_the_first_partition_turns_so_no_partition_is_always_first() -> None:
    consumer = _Consumer({tp: 100 for tp in TPS})
    reader = FairReader()
    firsts = []
    for _ in range(3):
        batch, _ = await reader.read(
            _as_aiokafka(consumer), timeout_ms=0, max_records=4, generation=lambda: 0
        )
        firsts.append(next(iter(batch)).partition)
    assert firsts == [0, 1, 2]


async def test_an_unreadable_batch_puts_back_what_was_already_taken() -> None:
    consumer = _Consumer({tp: 100 for tp in TPS})

    def fail_on_third(partitions: tuple[TopicPartition, ...]) -> None:
        if partitions == (TPS[2],):
            raise UnsupportedCodecError("lz4")

    consumer.on_read = fail_on_third
    with pytest.raises(UnsupportedCodecError):
        await FairReader().read(
            _as_aiokafka(consumer), timeout_ms=0, max_records=30, generation=lambda: 0
        )
    assert consumer.position == {TPS[0]: 0, TPS[1]: 0, TPS[2]: 0}


async def test_a_read_from_a_newer_assignment_goes_back_and_the_batch_keeps_its_generation() -> (
    None
):
    consumer = _Consumer({tp: 100 for tp in TPS})
    generation = [7]

    def rebalance_on_second(partitions: tuple[TopicPartition, ...]) -> None:
        if partitions == (TPS[1],):
            generation[0] = 8

    consumer.on_read = rebalance_on_second
    batch, read_at = await FairReader().read(
        _as_aiokafka(consumer), timeout_ms=0, max_records=30, generation=lambda: generation[0]
    )
    assert read_at == 7  # the caller drops it: its positions died with generation 7
    assert list(batch) == [TPS[0]]
    assert consumer.position[TPS[1]] == 0  # read under generation 8, put back
