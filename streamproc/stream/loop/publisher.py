"""Publishing one micro-batch's outputs together with its input offsets.

Two guarantees, chosen by the broker:

- :class:`TransactionalPublisher` (real Kafka): the outputs (verdicts, flags, outcomes,
  dead letters) and the input offsets commit in ONE Kafka transaction, so a
  ``read_committed`` reader sees each answer's outputs exactly once whatever crashes.
  The transactional id is the worker slot's stable name: a restarted worker fences its
  predecessor and aborts the transaction it left open.
- :class:`AtLeastOncePublisher` (the Tansu demo broker, no transactions): every output is
  acknowledged by the broker before the input offsets are committed.

Either way a batch whose publishing fails is never acknowledged: the publisher raises
:class:`PublishFailed` and the worker stops (the orchestrator restarts it, and the
restarted worker judges the batch again from the last committed offsets).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "AtLeastOncePublisher",
    "OutboundRecord",
    "PublishFailed",
    "Publisher",
    "RecordsOnlyPublisher",
    "TransactionalPublisher",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class OutboundRecord:
    """One record to send: the topic it goes to, its key, its serialised value (None: a
    tombstone, which deletes the key from a compacted topic) and, where it matters, the
    partition. The loops make theirs with
    :class:`~streamproc.stream.output.topic.OutputTopic`, which keys, encodes and sizes
    them for their topic."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    """None: the producer's partitioner picks by key (murmur2, as Java clients do)."""
    headers: tuple[tuple[str, bytes], ...] = ()
    """Kafka record headers, e.g. the ``traceparent`` that continues the answer's trace."""


class PublishFailed(Exception):
    """The broker did not take a batch; its inputs were not acknowledged."""


class Publisher(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Send ``records``, then acknowledge ``offsets`` (next offset to read per
        partition); both or neither."""
        ...


class _ProducerPublisher(ABC):
    """A producer and a time limit per batch; subclasses say how a batch is delivered."""

    _failure = "batch not published"

    def __init__(self, producer: AIOKafkaProducer, timeout_s: float) -> None:
        self._producer = producer
        self._timeout_s = timeout_s

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        try:
            await asyncio.wait_for(self._deliver(records, offsets), self._timeout_s)
        except Exception as exc:
            raise PublishFailed(f"{self._failure}: {exc!r}") from exc

    async def _send_all(self, records: Sequence[OutboundRecord]) -> None:
        pending = [await _send(self._producer, record) for record in records]
        await asyncio.gather(*pending)

    @abstractmethod
    async def _deliver(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None: ...


class TransactionalPublisher(_ProducerPublisher):
    """Outputs and input offsets in one Kafka transaction (idempotent producer).

    ``start`` runs init_transactions, which fences an older producer with the same id and
    aborts whatever transaction a killed predecessor left open."""

    _failure = "transaction not committed"

    def __init__(
        self,
        *,
        group_id: str,
        transactional_id: str,
        timeout_s: float,
        client_options: Mapping[str, Any],
    ) -> None:
        producer = AIOKafkaProducer(
            transactional_id=transactional_id,
            enable_idempotence=True,
            acks="all",
            **{"linger_ms": 5, **client_options},  # a loop may ask for its own linger
        )
        super().__init__(producer, timeout_s)
        self._group_id = group_id

    async def _deliver(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        producer = self._producer
        await producer.begin_transaction()
        try:
            await self._send_all(records)
            if offsets:  # a tick's closings come with no input to acknowledge
                await producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()},
                    self._group_id,
                )
        except BaseException:
            await _abort_quietly(producer)
            raise
        await producer.commit_transaction()


class AtLeastOncePublisher(_ProducerPublisher):
    """Every output acknowledged by the broker, then the input offsets committed."""

    _failure = "batch not acknowledged"

    def __init__(
        self,
        *,
        consumer: AIOKafkaConsumer,
        timeout_s: float,
        one_record_per_batch: bool,
        client_options: Mapping[str, Any],
    ) -> None:
        producer = AIOKafkaProducer(
            acks="all",
            linger_ms=0 if one_record_per_batch else 5,
            # Tansu under-reports the last offset of multi-record batches.
            max_batch_size=1 if one_record_per_batch else 16384,
            **client_options,
        )
        super().__init__(producer, timeout_s)
        self._consumer = consumer

    async def _deliver(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        await self._send_all(records)
        if offsets:
            await self._consumer.commit(
                {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()}
            )


class RecordsOnlyPublisher(_ProducerPublisher):
    """Every record acknowledged by the broker, with no input offsets (nothing was
    consumed for them: the gate's HTTP records, its replies sent at once)."""

    _failure = "records not acknowledged"

    async def _deliver(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        del offsets  # always empty
        await self._send_all(records)


async def _send(producer: AIOKafkaProducer, record: OutboundRecord) -> Awaitable[Any]:
    future: Awaitable[Any] = await producer.send(
        record.topic,
        value=record.value,
        key=record.key,
        partition=record.partition,
        headers=list(record.headers) or None,
    )
    return future


async def _abort_quietly(producer: AIOKafkaProducer) -> None:
    """Abort the open transaction; if even that fails the broker aborts it on timeout,
    or the restarted worker's init_transactions does."""
    try:
        await asyncio.wait_for(producer.abort_transaction(), 10.0)
    except Exception as exc:  # noqa: BLE001 - the original error is what matters
        log.warning("transaction_abort_failed", error=repr(exc))
