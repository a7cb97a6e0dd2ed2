"""The judging consumer: answers in, verdicts out, exactly once on real Kafka.

This loop is ours, not a faust agent, for three reasons the issue tracker documents:
faust's transactions are chosen by output partition, which does not fit inputs keyed by
conversation and outputs keyed by answer; faust's fetcher died on a compressed batch it
could not read; and after crashes a faust worker could own partitions it never read,
silently. Here every step is visible:

1. read a micro-batch (``worker.batch_max`` records or ``batch_wait_s``), an equal share
   from each owned partition (:class:`~streamproc.kafka.fair_read.FairReader`);
2. run the pure judging stage off the event loop, in a thread or a process of its own
   (:mod:`~streamproc.verdicts.runner`);
3. publish its records and the batch's input offsets through a :class:`Publisher` - one
   Kafka transaction on real Kafka, acknowledged-then-committed on Tansu - and, while
   that transaction runs, judge the next batch if the consumer already holds one
   (batches still publish one after another, in order, under the rebalance lock, which
   the chain lets go of as soon as a rebalance waits for it);
4. tell the progress watch; a partition with lag and no progress is logged and makes
   the worker not live.

A batch whose publishing fails raises :class:`PublishFailed` out of :meth:`run`: the
worker process exits non-zero and its inputs are judged again by whoever owns them next.
No input can cause that: trace-context headers beyond W3C's limits are dropped (and
noted in the verdict), records keep their headers' bytes under their topic's limit, and
a record the broker still refuses is replaced by its dead letter.
A record batch the client cannot read (an unknown codec, a corrupt batch) is isolated to
its partition, dead-lettered offset by offset (``unreadable_record``) and skipped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import ConsumerRecord
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.judge import Judge
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.fair_read import FairReader
from streamproc.kafka.topics import DEAD_LETTER_MAX_BYTES
from streamproc.monitor.dedup import JudgeDedup
from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.sensors import JudgingSensor
from streamproc.telemetry.trace_headers import report_dropped
from streamproc.telemetry.tracing import BatchTrace, MessageRef, MessageTrace, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.runner import JudgeRunner, JudgeThread
from streamproc.verdicts.stage import IncomingMessage, StageLimits, StageOutput

__all__ = ["JudgeLoop", "judge_group_id"]

log = structlog.get_logger(__name__)

_UNREADABLE = (UnsupportedCodecError, CorruptRecordException)

_Records = Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]
_Unreadable = Sequence[tuple[TopicPartition, int, Exception]]


@dataclass(frozen=True, slots=True)
class _Judged:
    """A judged batch waiting to be published: its records, offsets and open trace."""

    traced: BatchTrace
    output: StageOutput
    outbound: list[OutboundRecord]
    offsets: dict[TopicPartition, int]
    unreadable: _Unreadable


def judge_group_id(app_id: str) -> str:
    """The judging consumer's group."""
    return f"{app_id}.judge"


class JudgeLoop(ConsumerLoop):
    """Consume answers, judge them in micro-batches, publish, acknowledge; see module doc."""

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        judge: Judge | JudgeRunner,
        *,
        limits: StageLimits,
        client_options: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
        telemetry: Telemetry | None = None,
        metrics: JudgingSensor | None = None,
    ) -> None:
        """``limits``: the judging stage's (:func:`streamproc.wiring.stage_limits`), with
        the judge's key in the measured-accuracy table that review items carry."""
        worker = kafka.worker
        super().__init__(
            kafka,
            name="judge",
            topic=kafka.names.answers,
            client_options=client_options,
            consumer_options={
                "max_poll_records": worker.batch_max,
                "max_partition_fetch_bytes": max(1024 * 1024, worker.max_event_bytes + 65536),
            },
            producer_options={"max_request_size": DEAD_LETTER_MAX_BYTES + 65536},
        )
        # One batch is judged at a time (its outputs and offsets commit in order); the
        # judge spreads its own model calls over threads (``nli_parallel_calls``). A bare
        # judge runs in a thread (``executor``, default one of its own).
        self._runner = judge if isinstance(judge, JudgeRunner) else JudgeThread(judge, executor)
        self._limits = limits
        self._tracing = Tracing(telemetry or Telemetry.disabled(), group=self.group_id)
        self._metrics: JudgingSensor = metrics or WorkerMetrics()
        self._topics = kafka.outputs
        self.judged = 0
        self.unreadable = 0
        self._last_unreadable: TopicPartition | None = None
        self._reader = FairReader()
        self._dedup = JudgeDedup(kafka, self._client_options)

    # ------------------------------------------------------------------ one batch

    async def _step(self) -> None:
        unreadable: list[tuple[TopicPartition, int, Exception]] = []
        batch: Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]
        try:
            batch, read_at = await self._reader.read(
                self._consumer,
                timeout_ms=int(self._kafka.worker.batch_wait_s * 1000),
                max_records=self._kafka.worker.batch_max,
                generation=lambda: self._read_epoch,
            )
        except _UNREADABLE as exc:
            batch, unreadable = await self._isolate_unreadable(exc)
            read_at = self._read_epoch
        if not batch and not unreadable:
            return
        async with self._lock:
            if self._admit(batch, read_at):
                await self._judge_and_publish(batch, unreadable)

    async def _judge_and_publish(self, batch: _Records, unreadable: _Unreadable) -> None:
        """Judge ``batch`` and publish it; while it publishes, judge the next batch if one
        is already fetched (never waiting for one), and so on while there is one. The
        judge then works while the broker commits the batch before (at half load a
        small batch's transaction was a quarter of each cycle). Batches still publish in
        order, one transaction each, all under the lock; the chain ends, and the lock is
        let go, when nothing is fetched, a rebalance waits for the lock, or the loop is
        stopping. A batch whose publishing fails raises after the batch judged behind
        it is done, which is never published."""
        judged: _Judged | None = await self._judge(batch, unreadable)
        while judged is not None:
            publishing = asyncio.create_task(self._publish(judged), name="judge-publish")
            try:
                following = await self._judge_fetched() if self._may_go_on(judged) else None
            except BaseException:
                await asyncio.gather(publishing, return_exceptions=True)
                raise
            try:
                await publishing
            except BaseException as exc:
                if following is not None:
                    following.traced.end(error=exc)
                raise
            judged = following

    def _may_go_on(self, judged: _Judged) -> bool:
        """Whether to judge another batch while ``judged`` publishes. Not after an
        unreadable record: its partition is sought past it only once it is published."""
        return not (self._stopping.is_set() or self._rebalance_waiting or judged.unreadable)

    async def _judge_fetched(self) -> _Judged | None:
        """The next batch from what the consumer already holds, judged; None if there is
        none (an unreadable batch is left to the next step, which isolates it)."""
        try:
            batch, read_at = await self._reader.read(
                self._consumer,
                timeout_ms=0,
                max_records=self._kafka.worker.batch_max,
                generation=lambda: self._read_epoch,
            )
        except _UNREADABLE:
            return None
        self.last_poll_at = time.monotonic()
        if not batch or not self._admit(batch, read_at):
            return None
        return await self._judge(batch, ())

    async def _judge(self, batch: _Records, unreadable: _Unreadable) -> _Judged:
        """Run the judging stage on ``batch`` and make its records; the batch's trace
        stays open until :meth:`_publish` ends it."""
        records = [record for tp in sorted(batch) for record in batch[tp]]
        traced = self._tracing.start_batch([MessageRef.from_record(r) for r in records])
        try:
            messages = [_incoming(record, traced.messages[i]) for i, record in enumerate(records)]
            messages, repeated = self._dedup.split(messages, time.time())
            output = StageOutput()
            if messages:
                with traced.clock.stage("judge"):
                    output = await self._runner.judge(messages, self._limits, self._topics)
                for name, start_ns, end_ns in output.stage_times:
                    traced.clock.record(f"judge.{name}", start_ns, end_ns)
            output.repeats += repeated
            self._dedup.judged(output, time.time())
            _trace_outputs(traced, output)
            outbound = [*output.records, *self._dedup.records()]
            offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
            for tp, offset, exc in unreadable:
                outbound.append(self._unreadable_letter(tp, offset, exc, traced.headers))
                offsets[tp] = max(offsets.get(tp, 0), offset + 1)
        except BaseException as exc:
            traced.end(error=exc)
            raise
        return _Judged(traced, output, outbound, offsets, tuple(unreadable))

    async def _publish(self, judged: _Judged) -> None:
        """Publish one judged batch with its offsets, then account for it."""
        traced, output = judged.traced, judged.output
        with traced:
            with traced.clock.stage("publish"):
                await self._publisher.publish(judged.outbound, judged.offsets)
            self._metrics.observe_batch(output, published_at=datetime.now(UTC))
            self._metrics.dead_letter(
                *(DeadLetterReason.UNREADABLE_RECORD for _ in judged.unreadable)
            )
            for tp, offset, _ in judged.unreadable:
                self._consumer.seek(tp, offset + 1)
            self.watch.progress.acknowledged(judged.offsets, time.monotonic())
            self.judged += len(output.verdicts)
            _log_outputs(traced, output)
            self._count_dropped(traced)

    def _count_dropped(self, traced: BatchTrace) -> None:
        """Count and log each trace-context field left out, once its batch is published."""
        for message in traced.messages:
            with message.bound():
                report_dropped(message.dropped, self._metrics.trace_context_dropped)

    # ------------------------------------------------------------------ rebalances

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._dedup.forget(partitions)

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        await self._dedup.restore(partitions)

    def _diverted(self, reason: DeadLetterReason) -> None:
        self._metrics.dead_letter(reason)

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
                for _ in range(self._kafka.worker.batch_max):
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

    def _unreadable_letter(
        self,
        tp: TopicPartition,
        offset: int,
        exc: Exception,
        headers: OutHeaders,
    ) -> OutboundRecord:
        self.unreadable += 1
        origin = MessageOrigin(tp.topic, tp.partition, offset, None)
        detail = f"record batch could not be read by the client: {exc!r}"
        letter = prepare_dead_letter(
            self._topics.dead_letters,
            Rejection(DeadLetterReason.UNREADABLE_RECORD, detail),
            origin,
            None,
            headers=headers,
        )
        log.error("unreadable_record", partition=tp.partition, offset=offset, error=repr(exc))
        return letter.record


def _incoming(record: ConsumerRecord[bytes, bytes], traced: MessageTrace) -> IncomingMessage:
    return IncomingMessage(
        value=record.value,
        origin=MessageOrigin(record.topic, record.partition, record.offset, record.key),
        trace_id=traced.trace_id,
        headers=traced.headers,
        notes=traced.notes,
    )


def _trace_outputs(traced: BatchTrace, output: StageOutput) -> None:
    """Put each verdict and dead letter on its message's span."""
    for origin, verdict in zip(output.verdict_origins, output.verdicts, strict=True):
        traced.verdict(origin, verdict)
    for letter in output.dead_letters:
        traced.dead_letter(letter, letter.reason.value)


def _log_outputs(traced: BatchTrace, output: StageOutput) -> None:
    for origin in output.repeats:
        log.info(
            "duplicate_event",
            partition=origin.partition,
            offset=origin.offset,
            detail="same (tenant, event_id) as a message judged in this batch or within "
            "worker.dedup_horizon_s: judged once, this copy acknowledged and dropped",
        )
    for letter in output.dead_letters:
        with traced.message(letter).bound():
            log.warning("dead_letter", reason=letter.reason.value, error=letter.error)
    for message in traced.messages:
        verdict = message.verdict
        if verdict is None:
            continue
        with message.bound():
            log.info(
                "verdict",
                action=verdict.judgement.action.value,
                hallucinated=verdict.judgement.hallucinated,
            )
