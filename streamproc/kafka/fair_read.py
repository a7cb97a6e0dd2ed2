"""Read a batch that takes from every owned partition, not from the first one only.

aiokafka's ``getmany`` drains its buffered fetches partition by partition: one fetch
holds up to ``max_partition_fetch_bytes`` (1 MiB, a few thousand answers), so a worker
catching up on a backlog judged one partition to its end before it read the next. Every
outcome of the other partitions then reached the windows minutes of event time behind
the first's, as late answers: a replayed 50-minute spike was decided on a third of its
answers and paged a minute late in CI. Equal shares per partition were not enough: the
partitions' densities differ, and their event times drifted apart by minutes over a
backlog. :class:`FairReader` follows Kafka Streams' rule for a task with several input
partitions: the partition furthest behind in time goes next. It takes one record from
every partition that has records buffered (none starves, whatever its timestamps), then
small chunks, each from the partition whose last record handed out has the oldest
timestamp (the producer's create time, or the broker's append time: close to the
answer's own time for a live producer, and never read from the value, which is not
parsed yet), until the batch is full or nothing is buffered.

The reads after the first never wait (``timeout_ms=0``), so no rebalance can run between
them unless aiokafka itself waits for an assignment; the generation is checked after each
read and a read from a newer assignment is put back (sought to its first offsets). If a
read raises (an unreadable record batch), the records already taken are put back before
the error goes on: their positions have moved, and the caller's isolation re-reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.structs import TopicPartition

__all__ = ["Batch", "FairReader", "put_back"]

Batch = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]


def put_back(
    consumer: AIOKafkaConsumer,
    batch: Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]],
) -> None:
    """Seek each partition of ``batch`` to its first record: it is read again."""
    for tp, records in batch.items():
        if records:
            consumer.seek(tp, records[0].offset)


class FairReader:
    """Batches led by the partition furthest behind in time (see the module docstring)."""

    def __init__(self) -> None:
        self._turn = 0
        self._last_ts: dict[TopicPartition, int] = {}
        """Timestamp of the last record handed out, per partition."""

    async def read(
        self,
        consumer: AIOKafkaConsumer,
        *,
        timeout_ms: int,
        max_records: int,
        generation: Callable[[], int],
    ) -> tuple[Batch, int]:
        """A batch of at most ``max_records`` and the generation it was read in."""
        assigned = sorted(consumer.assignment())
        batch: Batch = {}
        read_at = generation()
        if len(assigned) > 1:
            batch = await self._take_in_time_order(
                consumer, assigned, max_records, generation, read_at
            )
        if not batch:
            got = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
            read_at = generation()
            batch = {tp: list(records) for tp, records in got.items()}
        for tp, records in batch.items():
            if records:
                self._last_ts[tp] = records[-1].timestamp
        return batch, read_at

    async def _take_in_time_order(
        self,
        consumer: AIOKafkaConsumer,
        assigned: list[TopicPartition],
        max_records: int,
        generation: Callable[[], int],
        read_at: int,
    ) -> Batch:
        """One record from each partition with any buffered (so none starves, whatever
        its timestamps), then small chunks, each from the partition whose last record
        handed out is oldest, until the batch is full or the buffers are empty."""
        start = self._turn % len(assigned)
        self._turn += 1
        order = assigned[start:] + assigned[:start]
        turn = {tp: place for place, tp in enumerate(order)}
        chunk = max(1, max_records // (4 * len(assigned)))
        batch: Batch = {}
        taken = 0
        try:
            for tp in order:
                if taken == max_records:
                    return batch
                got = await self._take(consumer, batch, read_at, generation, tp, 1)
                if got is None:
                    return batch
                taken += got
            ready = {tp for tp in order if tp in batch}
            while ready and taken < max_records:
                tp = min(ready, key=lambda t: (self._last_taken(batch, t), turn[t]))
                limit = min(chunk, max_records - taken)
                got = await self._take(consumer, batch, read_at, generation, tp, limit)
                if got is None:
                    return batch
                if got == 0:
                    ready.discard(tp)
                taken += got
        except BaseException:
            put_back(consumer, batch)
            raise
        return batch

    def _last_taken(self, batch: Batch, tp: TopicPartition) -> int:
        records = batch.get(tp)
        return records[-1].timestamp if records else self._last_ts.get(tp, -1)

    @staticmethod
    async def _take(
        consumer: AIOKafkaConsumer,
        batch: Batch,
        read_at: int,
        generation: Callable[[], int],
        tp: TopicPartition,
        limit: int,
    ) -> int | None:
        """Add up to ``limit`` buffered records of ``tp`` to ``batch``: how many, or
        None when the assignment changed during the read (what it read is put back)."""
        got = await consumer.getmany(tp, timeout_ms=0, max_records=limit)
        if generation() != read_at:
            put_back(consumer, got)
            return None
        records = got.get(tp, [])
        if records:
            batch.setdefault(tp, []).extend(records)
        return len(records)
