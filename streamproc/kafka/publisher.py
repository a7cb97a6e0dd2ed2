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

One record the broker can never take must not stop a loop for good (it would fail again
on every restart). Given a ``divert`` (:data:`Divert`: the record's dead letter), a
publisher sends in its place every record it knows to be too large (over the producer's
``max_request_size`` or its topic's known ``max.message.bytes``, measured as the
producer measures), and, when the broker still refuses records for their size, starts a
fresh producer (aiokafka's idempotent producer cannot send to that partition again) and
sends the batch again, the refused records each on their own so that only one refused
alone is diverted. Every failure is logged with the topic, key, size and cause.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError, RecordListTooLargeError
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamproc.verdicts.record import OutboundRecord

__all__ = [
    "AtLeastOncePublisher",
    "Divert",
    "OutboundRecord",
    "PublishFailed",
    "Publisher",
    "RecordsOnlyPublisher",
    "TransactionalPublisher",
]

log = structlog.get_logger(__name__)


Divert = Callable[[OutboundRecord, str], OutboundRecord]
"""``(record, why) -> the dead letter published in its place``."""

_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError)
"""Errors that mean the broker (or the producer) will never take the record."""


class PublishFailed(Exception):
    """The broker did not take a batch; its inputs were not acknowledged."""


class _RecordsRefused(Exception):
    """Records of the batch refused for their size (positions in the batch, and why)."""

    def __init__(self, refused: dict[int, BaseException]) -> None:
        super().__init__(f"{len(refused)} records refused")
        self.refused = refused


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
    """A producer and a time limit per batch; subclasses say how a batch is delivered.

    ``divert``: the dead letter of a record the broker cannot take (None: such a record
    fails the batch, as any error does). ``limits``: known ``max.message.bytes`` by
    topic, checked before sending."""

    _failure = "batch not published"

    def __init__(
        self,
        producer: AIOKafkaProducer | Callable[[], AIOKafkaProducer],
        timeout_s: float,
        *,
        divert: Divert | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        """``producer``: a factory where refused records may be diverted (a refusal
        needs a fresh producer), else the producer itself."""
        if isinstance(producer, AIOKafkaProducer):
            made, producer = producer, None
        else:
            made = producer()
        self._make_producer = producer
        self._producer = made
        self._timeout_s = timeout_s
        self._divert = divert
        self._limits: Mapping[str, int] = limits or {}
        self._alone: set[int] = set()
        """Positions sent on their own this round (suspected of a refusal)."""

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        batch = self._guard(records)
        self._alone = set()
        rounds = 2 * len(batch) + 2  # a refused record is isolated, then diverted
        for round_ in range(rounds):
            try:
                await asyncio.wait_for(self._deliver(batch, offsets), self._timeout_s)
                return
            except _RecordsRefused as refused:
                _log_refused(batch, refused.refused)
                if self._divert is None or self._make_producer is None or round_ == rounds - 1:
                    raise PublishFailed(f"{self._failure}: {refused.refused}") from refused
                await self._restart()
                batch = self._isolate(batch, refused.refused)
            except Exception as exc:
                _log_failed(batch, exc)
                raise PublishFailed(f"{self._failure}: {exc!r}") from exc

    def _guard(self, records: Sequence[OutboundRecord]) -> list[OutboundRecord]:
        """``records``, each one known to be too large replaced by its dead letter."""
        guarded = list(records)
        if self._divert is None:
            return guarded
        max_request = int(self._producer._max_request_size)
        for i, record in enumerate(guarded):
            limit = min(max_request, self._limits.get(record.topic, max_request))
            if record.size > limit:
                why = (
                    f"record of {record.size} bytes for {record.topic} over the limit of "
                    f"{limit} bytes; not sent"
                )
                log.error("output_diverted", why=why, **record.describe())
                guarded[i] = self._divert(record, why)
        return guarded

    def _isolate(
        self, batch: list[OutboundRecord], refused: Mapping[int, BaseException]
    ) -> list[OutboundRecord]:
        """The batch to send next: a record refused alone diverted; the other refused ones
        (perhaps refused only for sharing a produce batch with one too large) suspected,
        and sent alone from now on, as are the suspects not yet sent."""
        assert self._divert is not None
        for i, error in refused.items():
            if i in self._alone:
                record = batch[i]
                why = f"refused by the broker: {error!r}"
                log.error("output_diverted", why=why, **record.describe())
                batch[i] = self._divert(record, why)
                self._alone.discard(i)
            else:
                self._alone.add(i)
        return batch

    async def _restart(self) -> None:
        """A fresh producer: after a refused batch aiokafka's idempotent producer gets
        OutOfOrderSequenceNumber for that partition, and a new one (for a transactional
        id, a new epoch) starts the sequences again."""
        assert self._make_producer is not None
        old, self._producer = self._producer, self._make_producer()
        try:
            await asyncio.wait_for(old.stop(), 10.0)
        except Exception as exc:  # noqa: BLE001 - the old producer is dropped anyway
            log.warning("producer_stop_failed", error=repr(exc))
        await self._producer.start()

    async def _send_all(self, records: Sequence[OutboundRecord]) -> None:
        """Send every record; raises :class:`_RecordsRefused` naming each refused one. A record
        suspected this round is sent on its own: what was sent before it is acknowledged
        first, and it is acknowledged before the next is sent (order kept)."""
        pending: list[tuple[int, Awaitable[Any]]] = []
        refused: dict[int, BaseException] = {}

        async def settle() -> None:
            results = await asyncio.gather(*(f for _, f in pending), return_exceptions=True)
            for (i, _), result in zip(pending, results, strict=True):
                if isinstance(result, _REFUSED):
                    refused[i] = result
                elif isinstance(result, BaseException):
                    raise result
            pending.clear()

        for i, record in enumerate(records):
            alone = i in self._alone
            if alone:
                await settle()
            try:
                pending.append((i, await _send(self._producer, record)))
            except _REFUSED as exc:  # the producer's own size check: nothing was sent
                refused[i] = exc
            if alone:
                await settle()
            if refused and self._divert is not None:
                break  # the transaction is lost: no need to send the rest
        await settle()
        if refused:
            raise _RecordsRefused(refused)

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
        divert: Divert | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        def make() -> AIOKafkaProducer:
            return AIOKafkaProducer(
                transactional_id=transactional_id,
                enable_idempotence=True,
                acks="all",
                **{"linger_ms": 5, **client_options},  # a loop may ask for its own linger
            )

        super().__init__(make, timeout_s, divert=divert, limits=limits)
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
        divert: Divert | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        def make() -> AIOKafkaProducer:
            return AIOKafkaProducer(
                acks="all",
                linger_ms=0 if one_record_per_batch else 5,
                # Tansu under-reports the last offset of multi-record batches.
                max_batch_size=1 if one_record_per_batch else 16384,
                **client_options,
            )

        super().__init__(make, timeout_s, divert=divert, limits=limits)
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


def _log_refused(batch: Sequence[OutboundRecord], refused: Mapping[int, BaseException]) -> None:
    for i, error in refused.items():
        log.error("publish_refused", cause=repr(error), **batch[i].describe())


def _log_failed(batch: Sequence[OutboundRecord], error: BaseException) -> None:
    """Which batch failed and why: its size and its largest record (the likeliest cause
    when the error does not say)."""
    largest = max(batch, key=lambda record: record.size, default=None)
    log.error(
        "publish_failed",
        cause=repr(error),
        records=len(batch),
        topics=sorted({record.topic for record in batch}),
        bytes=sum(record.size for record in batch),
        **({} if largest is None else {f"largest_{k}": v for k, v in largest.describe().items()}),
    )


async def _abort_quietly(producer: AIOKafkaProducer) -> None:
    """Abort the open transaction; if even that fails the broker aborts it on timeout,
    or the restarted worker's init_transactions does."""
    try:
        await asyncio.wait_for(producer.abort_transaction(), 10.0)
    except Exception as exc:  # noqa: BLE001 - the original error is what matters
        log.warning("transaction_abort_failed", error=repr(exc))
