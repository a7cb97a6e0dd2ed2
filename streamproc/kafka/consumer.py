"""What the consumer loops (the worker's judging and windows loops, the audit sink) share:
one consumer group on one topic (or several: the labels loop joins two co-partitioned
ones), a :class:`~streamproc.kafka.publisher.Publisher`
that commits outputs and offsets together, a progress watch, and the rebalance discipline.

The discipline: a batch is handled under ``_lock`` from the moment it is read until it is
published; revoking partitions takes the same lock, so a batch in flight is finished
before its partitions go to another worker. :meth:`ConsumerLoop._admit` decides, under
the lock, whether a batch just read may be handled: one read before a revocation is
dropped (the next assignment starts again from the committed offsets), and one read from
a new assignment before ``on_partitions_assigned`` has run is put back (its partitions
are sought to its first offsets), never dropped - the consumer's position has already
moved past it, so dropping it would lose it (RELIABILITY.md, Incidents).

A batch is known by the *read epoch* it was read in (:attr:`ConsumerLoop._read_epoch`):
the generation and whether its assignment was prepared, taken with no await after the
read. aiokafka hands out records of a new assignment while ``on_partitions_assigned`` is
still running, so a batch read then is put back even if the assignment is prepared by
the time the batch is looked at: preparing it may have sought the positions back, and
the same records would come a second time.

With transactions, an assignment first waits for its partitions' committed offsets to be
*stable* (:mod:`~streamproc.kafka.stable_offsets`: no transaction still holds
pending offsets for them) and seeks there, before any state is restored or record read;
a batch read below those offsets meanwhile is put back. Otherwise a worker given a
partition while its previous owner's last commit is still being written would judge
that batch again. A killed worker's open transaction holds them until the broker aborts
it (``transaction_timeout_s``), longer than a session: aiokafka sends no heartbeat while
``on_partitions_assigned`` runs, so the callback waits at most a third of the session,
and if they are still pending the assignment's partitions stay paused while the loop
asks again before each step (the member stays in its group meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.topic_names import TopicNames
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.publisher import AtLeastOncePublisher, Publisher, TransactionalPublisher
from streamproc.kafka.security import explain_access_errors
from streamproc.kafka.stable_offsets import StableOffsetsUnavailable, stable_committed
from streamproc.kafka.support import bounded_close, partition_names, record_count
from streamproc.kafka.watch import ConsumerWatch
from streamproc.verdicts.catalog import OutputTopics
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.options import WorkerSettings
from streamproc.verdicts.record import OutboundRecord

__all__ = ["ConsumerLoop", "KafkaLoopOptions", "transactional_id"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class KafkaLoopOptions:
    """What every consumer loop of one process shares: the broker, the worker's group,
    timing and transaction settings, the topics' names and the output topics. The
    composition root builds it once (:func:`streamproc.wiring.kafka_loop_options`)."""

    connection: KafkaConnection
    worker: WorkerSettings
    """``worker.*``: sessions, rebalances, transactions, publishing, stalls, batches."""
    names: TopicNames
    outputs: OutputTopics

    @property
    def app_id(self) -> str:
        """What the consumer groups and transactional ids start with."""
        return self.names.app_id


def transactional_id(instance_id: str | None, group_id: str) -> str:
    """Stable per worker slot when ``instance_id`` (``worker.instance_id``) is set (a
    restarted slot fences its predecessor at once); otherwise unique per process, and a
    killed worker's open transaction is aborted by the broker after
    ``transaction_timeout_s``."""
    slot = instance_id or f"{socket.gethostname()}-{os.getpid()}"
    return f"{group_id}.{slot}"


class ConsumerLoop(ABC):
    """One consumer group reading ``topic`` (one name, or several subscribed together);
    subclasses implement :meth:`_step`."""

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        *,
        name: str,
        topic: str | Sequence[str],
        client_options: Mapping[str, Any] | None,
        consumer_options: Mapping[str, Any],
        producer_options: Mapping[str, Any],
        exactly_once: bool = True,
    ) -> None:
        """``consumer_options`` / ``producer_options``: more keyword arguments for the
        clients (fetch sizes, batch sizes). ``exactly_once=False``: always the
        at-least-once publisher, for a loop whose outputs are idempotent anyway (the
        audit sink: its store skips answers it holds); otherwise one Kafka transaction
        per batch where ``worker.exactly_once`` and the broker allow it."""
        self._kafka = kafka
        self.name = name
        self._subscribed: tuple[str, ...] = (topic,) if isinstance(topic, str) else tuple(topic)
        if not self._subscribed:
            raise ValueError(f"{name}: no topic to read")
        self._topic = self._subscribed[0]
        """The (first) topic read."""
        self.group_id = kafka.names.group(name)
        # Kept as passed: kafka_security's options mask the SASL password in their repr.
        self._client_options: Mapping[str, Any] = client_options or {}
        self._consumer_options = consumer_options
        self._producer_options = producer_options
        self.transactional = (
            exactly_once and kafka.worker.exactly_once and kafka.connection.flavour == "kafka"
        )
        self.watch = ConsumerWatch(name, kafka.worker.stall_after_s)
        self.started = False
        self.ended = False
        """run() has returned or raised: the loop will read nothing more."""
        self.last_poll_at = time.monotonic()
        self._revoked_at: float | None = None
        self._lock = asyncio.Lock()
        self._rebalance_waiting = 0
        """Rebalance callbacks waiting for ``_lock``: a loop holding it lets go soon."""
        self._generation = 0
        self._assigned = False
        """``on_partitions_assigned`` has run for the current assignment."""
        self._floors: dict[TopicPartition, int] = {}
        """Per assigned partition, its stable committed offset: records below it were
        published by an earlier owner's transaction."""
        self._stable_fetch = self.transactional
        """Off for good once the broker turns out not to speak OffsetFetch v7."""
        self._settling: _Settling | None = None
        """An assignment whose committed offsets are still pending (its partitions paused)."""
        self._stopping = asyncio.Event()

    @property
    def live(self) -> bool:
        """No owned partition with lag has stood still for ``stall_after_s``."""
        return self.watch.live

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; raises ``PublishFailed`` when a batch cannot be
        published (its inputs stay unacknowledged). A record the broker can never take
        does not fail its batch: its dead letter goes in its place (:meth:`_divert`)."""
        connection = self._kafka.connection
        self._consumer, self._publisher = self._connect()
        async with explain_access_errors(connection.bootstrap_servers, connection.security):
            await self._publisher.start()
        try:
            self._consumer.subscribe(list(self._subscribed), listener=_Rebalance(self))
            async with explain_access_errors(connection.bootstrap_servers, connection.security):
                await self._consumer.start()
            self.started = True
            log.info(
                f"{self.name}_loop_started",
                group_id=self.group_id,
                guarantee="exactly_once" if self.transactional else "at_least_once",
            )
            await self._on_started()
            self.last_poll_at = time.monotonic()
            watchdog = asyncio.create_task(
                self.watch.run(
                    self._consumer, lambda: not self._lock.locked(), self._waiting_since
                ),
                name=f"{self.name}-progress-watch",
            )
            try:
                while not self._stopping.is_set():
                    if self._settling is not None:
                        async with self._lock:
                            await self._settle(timeout_s=0.0)
                    await self._step()
                    self.last_poll_at = time.monotonic()
            finally:
                watchdog.cancel()
        finally:
            self.started = False
            self.ended = True
            await bounded_close(self._consumer.stop(), "consumer")
            await bounded_close(self._publisher.stop(), "producer")

    def _waiting_since(self) -> float:
        """Since when the loop has made no headway: its last poll, or the start of a
        rebalance that has revoked its partitions and not assigned any since (a rejoin
        after a broker restart may never complete while polls return empty)."""
        if self._revoked_at is not None:
            return min(self._revoked_at, self.last_poll_at)
        return self.last_poll_at

    @property
    def _read_epoch(self) -> int:
        """The generation and whether its assignment is prepared, in one number: what a
        read takes with no await after ``getmany`` returns, for :meth:`_admit`."""
        return 2 * self._generation + int(self._assigned)

    def _admit(
        self, batch: Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]], read_at: int
    ) -> bool:
        """Under ``_lock``: whether ``batch`` may be handled now. ``read_at`` is the
        :attr:`_read_epoch` taken right after ``getmany`` returned (no await in between:
        aiokafka hands out records only of the assignment in force, so a revocation after
        the read shows as a new generation).

        - Revoked since the read: drop it. Its partitions' positions died with the old
          assignment; whoever owns them next starts from the committed offsets.
        - Read from a new assignment before it was prepared (``on_partitions_assigned``
          running, or waiting for this lock): put it back. The position has moved past
          these records, so each partition is sought to its first one (or its stable
          committed offset, if higher) and read again from the prepared assignment. No
          revocation can complete while the lock is held, so the assignment sought is the
          one the records came from.
        - Read (in part) below a partition's stable committed offset (read from where
          aiokafka's own offset fetch put it, before the stable one came): put back from
          that offset, as the records below it are published already.
        """
        generation, prepared = divmod(read_at, 2)
        if generation != self._generation:
            log.info(
                "batch_dropped_after_rebalance", consumer=self.name, records=record_count(batch)
            )
            return False
        if prepared and self._assigned:
            why = "batch_put_back_below_committed"
            if all(
                not records or records[0].offset >= self._floors.get(tp, 0)
                for tp, records in batch.items()
            ):
                return True
        else:
            why = "batch_put_back_until_assigned"
        for tp, records in batch.items():
            if records:
                self._consumer.seek(tp, max(records[0].offset, self._floors.get(tp, 0)))
        if batch:
            log.info(why, consumer=self.name, records=record_count(batch))
        return False

    @abstractmethod
    async def _step(self) -> None:
        """Read one batch, handle it under ``_lock``, publish it with its offsets."""

    async def _on_started(self) -> None:  # noqa: B027 - optional hook
        """Called once the clients have started, before the first :meth:`_step`."""

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:  # noqa: B027 - optional hook
        """Called under ``_lock`` when partitions go; drop what belongs to them."""

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:  # noqa: B027 - optional hook
        """Called under ``_lock`` when partitions come, before any of their records."""

    async def _prepare(self, partitions: list[TopicPartition]) -> None:
        """Under ``_lock``, from ``on_partitions_assigned``: settle the positions of
        ``partitions`` (module docstring), or leave them paused until :meth:`_settle`
        can, waiting here no more than a third of the session."""
        for tp in partitions:
            self._floors.pop(tp, None)
        worker = self._kafka.worker
        if not self._stable_fetch or not partitions:
            await self._prepared(partitions)
            return
        self._consumer.pause(*partitions)
        self._settling = _Settling(
            partitions, time.monotonic(), time.monotonic() + 2 * worker.transaction_timeout_s
        )
        await self._settle(
            timeout_s=min(2 * worker.transaction_timeout_s, worker.session_timeout_s / 3)
        )
        if self._settling is not None:
            log.info(
                "committed_offsets_pending",
                consumer=self.name,
                partitions=partition_names(partitions),
                hint="a previous owner's transaction is open: its partitions wait, paused",
            )

    async def _settle(self, *, timeout_s: float) -> None:
        """Under ``_lock``: the settling assignment prepared at its stable committed
        offsets, if they are stable within ``timeout_s`` (or its deadline has passed:
        then from the offsets aiokafka read, as a broker without v7 would)."""
        settling = self._settling
        if settling is None:
            return
        try:
            offsets = await stable_committed(
                self._consumer, self.group_id, settling.partitions, timeout_s=timeout_s
            )
        except StableOffsetsUnavailable as exc:
            log.warning("stable_offsets_unavailable", consumer=self.name, error=str(exc))
            self._stable_fetch = False
            offsets = {}
        waited_s = round(time.monotonic() - settling.since, 1)
        if offsets is None:
            if time.monotonic() < settling.deadline:
                return
            log.warning(
                "committed_offsets_still_pending",
                consumer=self.name,
                partitions=partition_names(settling.partitions),
                waited_s=waited_s,
            )
            offsets = {}
        elif waited_s > timeout_s + 1.0:
            log.info("committed_offsets_settled", consumer=self.name, waited_s=waited_s)
        for tp, offset in offsets.items():
            self._floors[tp] = offset
            self._consumer.seek(tp, offset)
        self._settling = None
        await self._prepared(settling.partitions)
        self._consumer.resume(*settling.partitions)

    async def _prepared(self, partitions: list[TopicPartition]) -> None:
        """Under ``_lock``, positions settled: the subclass prepares ``partitions``, then
        their records may be handled."""
        await self._on_assigned(partitions)
        self._revoked_at = None
        self._assigned = True
        self.watch.progress.assigned(partitions, time.monotonic())
        log.info("partitions_assigned", consumer=self.name, partitions=partition_names(partitions))

    def _divert(self, record: OutboundRecord, why: str) -> OutboundRecord:
        """The dead letter (``output_too_large``) published in place of ``record``, which
        the broker cannot take: the topic it was for, its key and its bytes (shrunk to fit,
        saying so), none of its headers (they may be what made it too large)."""
        dead_letters = self._kafka.outputs.dead_letters
        original_is_letter = record.topic == dead_letters.name
        detail = (
            f"output record for topic {record.topic!r} of {record.size} bytes "
            f"({len(record.headers)} headers) not published: {why}"
        )
        letter = prepare_dead_letter(
            dead_letters,
            Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, detail),
            MessageOrigin(
                record.topic, -1 if record.partition is None else record.partition, -1, record.key
            ),
            None if original_is_letter else record.value,
        )
        self._diverted(DeadLetterReason.OUTPUT_TOO_LARGE)
        return letter.record

    def _diverted(self, reason: DeadLetterReason) -> None:  # noqa: B027 - optional hook
        """Called for each output record replaced by its dead letter (for metrics)."""

    def _topic_limits(self) -> dict[str, int]:
        """``max.message.bytes`` of every topic the worker creates, by name."""
        topics = self._kafka.outputs
        limits: dict[str, int] = {}
        for name in topics.__dataclass_fields__:
            topic = getattr(topics, name)
            limits[topic.name] = min(topic.max_bytes, limits.get(topic.name, topic.max_bytes))
        return limits

    def _connect(self) -> tuple[AIOKafkaConsumer, Publisher]:
        """The Kafka clients; made inside the running event loop, as aiokafka requires."""
        connection, worker = self._kafka.connection, self._kafka.worker
        consumer = AIOKafkaConsumer(
            bootstrap_servers=connection.bootstrap_servers,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            session_timeout_ms=int(worker.session_timeout_s * 1000),
            heartbeat_interval_ms=int(min(3.0, worker.session_timeout_s / 3) * 1000),
            rebalance_timeout_ms=int(worker.rebalance_timeout_s * 1000),
            **self._consumer_options,
            **self._client_options,
        )
        producer_options = {
            **self._client_options,
            **self._producer_options,
            "bootstrap_servers": connection.bootstrap_servers,
        }
        publisher: Publisher
        if self.transactional:
            publisher = TransactionalPublisher(
                group_id=self.group_id,
                transactional_id=transactional_id(worker.instance_id, self.group_id),
                timeout_s=worker.publish_timeout_s,
                client_options={
                    **producer_options,
                    "transaction_timeout_ms": int(worker.transaction_timeout_s * 1000),
                },
                divert=self._divert,
                limits=self._topic_limits(),
            )
        else:
            publisher = AtLeastOncePublisher(
                consumer=consumer,
                timeout_s=worker.publish_timeout_s,
                one_record_per_batch=connection.flavour == "tansu",
                client_options=producer_options,
                divert=self._divert,
                limits=self._topic_limits(),
            )
        return consumer, publisher


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Finish the batch in flight before giving partitions up; prepare new partitions
    before any of their records is read; log both."""

    def __init__(self, loop: ConsumerLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        loop = self._loop
        partitions = sorted(revoked)
        async with _waiting_for(loop):
            loop._generation += 1
            loop._assigned = False
            loop._settling = None  # its partitions are gone, paused or not
            loop._revoked_at = time.monotonic()
            loop.watch.progress.revoked()
            await loop._on_revoked(partitions)
        log.info("partitions_revoked", consumer=loop.name, partitions=partition_names(partitions))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        loop = self._loop
        partitions = sorted(assigned)
        async with _waiting_for(loop):
            await loop._prepare(partitions)


@dataclass(slots=True)
class _Settling:
    """An assignment waiting for its committed offsets to be stable."""

    partitions: list[TopicPartition]
    since: float
    deadline: float
    """``time.monotonic()`` after which it goes on from the offsets aiokafka read."""


@contextlib.asynccontextmanager
async def _waiting_for(loop: ConsumerLoop) -> AsyncIterator[None]:
    """Hold the loop's lock, saying while we wait for it that a rebalance is waiting."""
    loop._rebalance_waiting += 1
    try:
        await loop._lock.acquire()
    finally:
        loop._rebalance_waiting -= 1
    try:
        yield
    finally:
        loop._lock.release()
