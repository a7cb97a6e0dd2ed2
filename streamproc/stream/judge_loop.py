"""The judging consumer: answers in, verdicts out, exactly once on real Kafka.

This loop is ours, not a faust agent, for three reasons the issue tracker documents:
faust's transactions are chosen by output partition, which does not fit inputs keyed by
conversation and outputs keyed by answer; faust's fetcher died on a compressed batch it
could not read; and after crashes a faust worker could own partitions it never read,
silently. Here every step is visible:

1. ``getmany`` a micro-batch (``worker.batch_max`` records or ``batch_wait_s``);
2. run the pure judging stage in an executor (never on the event loop);
3. publish its records and the batch's input offsets through a :class:`Publisher` - one
   Kafka transaction on real Kafka, acknowledged-then-committed on Tansu;
4. tell the progress watch; a partition with lag and no progress is logged and makes
   the worker not live.

A batch whose publishing fails raises :class:`PublishFailed` out of :meth:`run`: the
worker process exits non-zero and its inputs are judged again by whoever owns them next.
A record batch the client cannot read (an unknown codec, a corrupt batch) is isolated to
its partition, dead-lettered offset by offset (``unreadable_record``) and skipped.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.structs import TopicPartition

from streamproc.adapters.kafka_security import explain_access_errors
from streamproc.config import Settings
from streamproc.events import DeadLetterReason
from streamproc.judge import Judge
from streamproc.stream._loop_support import bounded_close, partition_names, record_count
from streamproc.stream.consumer_watch import ConsumerWatch
from streamproc.stream.intake import MessageOrigin, Rejection, dead_letter_for
from streamproc.stream.judging import (
    IncomingMessage,
    StageLimits,
    StageOutput,
    judge_messages,
    trace_id_from_traceparent,
)
from streamproc.stream.publisher import (
    AtLeastOncePublisher,
    OutboundRecord,
    Publisher,
    TransactionalPublisher,
)
from streamproc.stream.topics import DEAD_LETTER_MAX_BYTES

__all__ = ["JudgeLoop", "judge_group_id", "transactional_id"]

log = structlog.get_logger(__name__)

_UNREADABLE = (UnsupportedCodecError, CorruptRecordException)


def judge_group_id(settings: Settings) -> str:
    """The judging consumer's group (the windows' faust app uses ``app_id`` itself)."""
    return f"{settings.app_id}.judge"


def transactional_id(settings: Settings) -> str:
    """Stable per worker slot when ``worker.instance_id`` is set (a restarted slot fences
    its predecessor at once); otherwise unique per process, and a killed worker's open
    transaction is aborted by the broker after ``transaction_timeout_s``."""
    slot = settings.worker.instance_id or f"{socket.gethostname()}-{os.getpid()}"
    return f"{judge_group_id(settings)}.{slot}"


class JudgeLoop:
    """Consume answers, judge them in micro-batches, publish, acknowledge; see module doc."""

    def __init__(
        self,
        settings: Settings,
        judge: Judge,
        *,
        client_options: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._settings = settings
        self._judge = judge
        worker = settings.worker
        self.group_id = judge_group_id(settings)
        # Kept as passed: kafka_security's options mask the SASL password in their repr.
        self._client_options: Mapping[str, Any] = client_options or {}
        self.transactional = worker.exactly_once and settings.broker_flavour == "kafka"
        self._pool = executor or ThreadPoolExecutor(
            max_workers=worker.judge_threads, thread_name_prefix="judge"
        )
        self._limits = StageLimits.from_settings(settings)
        self._topics = {
            "verdict": settings.topics.verdicts,
            "flag": settings.topics.flags,
            "outcome": settings.topics.outcomes,
            "dead_letter": settings.topics.dead_letter,
        }
        self.watch = ConsumerWatch("judge", worker.stall_after_s)
        self.started = False
        self.judged = 0
        self.unreadable = 0
        self._lock = asyncio.Lock()
        self._generation = 0
        self._last_unreadable: TopicPartition | None = None
        self._stopping = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    def _connect(self) -> tuple[AIOKafkaConsumer, Publisher]:
        """The Kafka clients; made inside the running event loop, as aiokafka requires."""
        settings = self._settings
        worker = settings.worker
        consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            max_poll_records=worker.batch_max,
            session_timeout_ms=int(worker.session_timeout_s * 1000),
            heartbeat_interval_ms=int(min(3.0, worker.session_timeout_s / 3) * 1000),
            rebalance_timeout_ms=int(worker.rebalance_timeout_s * 1000),
            max_partition_fetch_bytes=max(1024 * 1024, worker.max_event_bytes + 64 * 1024),
            **self._client_options,
        )
        producer_options = {
            **self._client_options,
            "bootstrap_servers": settings.bootstrap_servers,
            "max_request_size": DEAD_LETTER_MAX_BYTES + 64 * 1024,
        }
        publisher: Publisher
        if self.transactional:
            publisher = TransactionalPublisher(
                consumer=consumer,
                group_id=self.group_id,
                transactional_id=transactional_id(settings),
                timeout_s=worker.publish_timeout_s,
                client_options={
                    **producer_options,
                    "transaction_timeout_ms": int(worker.transaction_timeout_s * 1000),
                },
            )
        else:
            publisher = AtLeastOncePublisher(
                consumer=consumer,
                timeout_s=worker.publish_timeout_s,
                one_record_per_batch=settings.broker_flavour == "tansu",
                client_options=producer_options,
            )
        return consumer, publisher

    async def run(self) -> None:
        """Run until :meth:`stop`; raises ``PublishFailed`` when a batch cannot be
        published (its inputs stay unacknowledged)."""
        self._consumer, self._publisher = self._connect()
        settings = self._settings
        async with explain_access_errors(settings.bootstrap_servers, settings.security):
            await self._publisher.start()
        try:
            self._consumer.subscribe([settings.topics.answers], listener=_Rebalance(self))
            async with explain_access_errors(settings.bootstrap_servers, settings.security):
                await self._consumer.start()
            self.started = True
            log.info(
                "judge_loop_started",
                group_id=self.group_id,
                guarantee="exactly_once" if self.transactional else "at_least_once",
            )
            watchdog = asyncio.create_task(
                self.watch.run(self._consumer, lambda: not self._lock.locked()),
                name="judge-progress-watch",
            )
            try:
                while not self._stopping.is_set():
                    await self._step()
            finally:
                watchdog.cancel()
        finally:
            self.started = False
            await bounded_close(self._consumer.stop(), "consumer")
            await bounded_close(self._publisher.stop(), "producer")

    def stop(self) -> None:
        self._stopping.set()

    @property
    def live(self) -> bool:
        """No owned partition with lag has stood still for ``stall_after_s``."""
        return self.watch.live

    # ------------------------------------------------------------------ one batch

    async def _step(self) -> None:
        generation = self._generation
        unreadable: list[tuple[TopicPartition, int, Exception]] = []
        try:
            batch = await self._consumer.getmany(
                timeout_ms=int(self._settings.worker.batch_wait_s * 1000),
                max_records=self._settings.worker.batch_max,
            )
        except _UNREADABLE as exc:
            batch, unreadable = await self._isolate_unreadable(exc)
        if not batch and not unreadable:
            return
        async with self._lock:
            if generation != self._generation:
                # Partitions were revoked after these records were fetched: whoever owns
                # them now reads them from the committed offsets.
                log.info("batch_dropped_after_rebalance", records=record_count(batch))
                return
            await self._judge_and_publish(batch, unreadable)

    async def _judge_and_publish(
        self,
        batch: Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]],
        unreadable: Sequence[tuple[TopicPartition, int, Exception]],
    ) -> None:
        records = [record for tp in sorted(batch) for record in batch[tp]]
        messages = [_incoming(record) for record in records]
        output = StageOutput()
        if messages:
            work = partial(judge_messages, messages, self._judge, limits=self._limits)
            output = await asyncio.get_running_loop().run_in_executor(self._pool, work)
        outbound = [OutboundRecord(self._topics[r.kind], r.key, r.value) for r in output.records]
        offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
        for tp, offset, exc in unreadable:
            outbound.append(self._unreadable_letter(tp, offset, exc))
            offsets[tp] = max(offsets.get(tp, 0), offset + 1)
        await self._publisher.publish(outbound, offsets)
        for tp, offset, _ in unreadable:
            self._consumer.seek(tp, offset + 1)
        self.watch.progress.acknowledged(offsets, time.monotonic())
        self.judged += len(output.verdicts)
        _log_outputs(output)

    # ------------------------------------------------------------------ unreadable data

    async def _isolate_unreadable(
        self, error: Exception
    ) -> tuple[
        dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
        list[tuple[TopicPartition, int, Exception]],
    ]:
        """The fetcher could not decode a record batch and did not say of which
        partition. Read the owned partitions alone, one record at a time, until one
        fails: the records before the bad one are judged as usual, and the offset where
        reading stopped is the unreadable record. The partition that failed last time is
        tried first, since a compressed batch fails once per record it holds."""
        log.warning("unreadable_batch", error=repr(error))
        assigned = sorted(self._consumer.assignment())
        if self._last_unreadable in assigned:
            assigned.remove(self._last_unreadable)
            assigned.insert(0, self._last_unreadable)
        fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        try:
            for tp in assigned:
                self._consumer.pause(*assigned)
                self._consumer.resume(tp)
                for _ in range(self._settings.worker.batch_max):
                    try:
                        got = await self._consumer.getmany(tp, timeout_ms=1000, max_records=1)
                    except _UNREADABLE as exc:
                        self._last_unreadable = tp
                        return fetched, [(tp, await self._consumer.position(tp), exc)]
                    if not got:
                        break
                    fetched.setdefault(tp, []).extend(got.get(tp, []))
        finally:
            self._consumer.resume(*assigned)
        return fetched, []

    def _unreadable_letter(self, tp: TopicPartition, offset: int, exc: Exception) -> OutboundRecord:
        self.unreadable += 1
        origin = MessageOrigin(tp.topic, tp.partition, offset, None)
        detail = f"record batch could not be read by the client: {exc!r}"
        letter = dead_letter_for(
            Rejection(DeadLetterReason.UNREADABLE_RECORD, detail), origin, None
        )
        log.error("unreadable_record", partition=tp.partition, offset=offset, error=repr(exc))
        return OutboundRecord(self._topics["dead_letter"], None, letter.model_dump_json().encode())


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Log every assignment; finish the batch in flight before giving partitions up, so
    no other worker commits offsets for records this one is still publishing."""

    def __init__(self, loop: JudgeLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        async with self._loop._lock:
            self._loop._generation += 1
            self._loop.watch.progress.revoked()
        log.info("partitions_revoked", partitions=partition_names(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        partitions = sorted(assigned)
        self._loop.watch.progress.assigned(partitions, time.monotonic())
        log.info("partitions_assigned", partitions=partition_names(partitions))


def _incoming(record: ConsumerRecord[bytes, bytes]) -> IncomingMessage:
    headers = {name.lower(): value for name, value in (record.headers or ())}
    return IncomingMessage(
        value=record.value,
        origin=MessageOrigin(record.topic, record.partition, record.offset, record.key),
        trace_id=trace_id_from_traceparent(headers.get("traceparent")),
    )


def _log_outputs(output: StageOutput) -> None:
    for origin in output.repeats:
        log.info(
            "duplicate_event_in_batch",
            partition=origin.partition,
            offset=origin.offset,
            detail="same event_id as an earlier message of this batch; judged once",
        )
    for letter in output.dead_letters:
        log.warning(
            "dead_letter",
            reason=letter.reason.value,
            error=letter.error,
            partition=letter.partition,
            offset=letter.offset,
        )
    for verdict in output.verdicts:
        log.info(
            "verdict",
            answer_id=verdict.answer_id,
            action=verdict.judgement.action.value,
            hallucinated=verdict.judgement.hallucinated,
            trace_id=verdict.trace_id,
        )
