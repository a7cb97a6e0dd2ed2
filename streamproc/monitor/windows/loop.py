"""The windows consumer: answer outcomes in, window aggregates out, exactly once on Kafka.

This replaces faust's ``count-windows`` agent: in the exactly-once test (two workers,
SIGKILLs, a broker restart) the faust agent stopped reading part of its outcome
partitions after a rebalance, silently, with 11 % of the answers never counted. Here:

- the outcomes are read ``read_committed`` (only what the judging loop committed);
- each owned partition's state (:mod:`~streamproc.monitor.windows.table`: panes per
  (tenant, assistant, model), series marks, seen marks) lives in memory and is
  changelogged to a compacted topic; a worker that takes a partition over restores it
  from that changelog before reading on;
- every ``tick_s`` the due series of each owned partition close their windows (the
  in-memory index names them; nothing scans the state): tumbling aggregates go to
  ``topics.aggregates``, hopping ones to ``window.hopping_topic``;
- the corrected rate uses the deployment's live accuracy where a cell has enough reviewer
  labels (:mod:`~streamproc.monitor.windows.live_accuracy`, a global table of the
  judge-accuracy topic followed while the loop runs), the offline counts elsewhere;
- an outcome too late for any window (its pane sealed) goes to ``window.late_topic``
  and is counted in :attr:`WindowLoop.late_events`, never dropped;
- a batch's aggregates, late outcomes, dead letters, hook records, changelog changes
  and input offsets go out in one Kafka transaction, so "counted", "closed" and
  "acknowledged" can never disagree (on Tansu: acknowledged first, then committed, and
  the seen marks drop redeliveries). The hooks (``windows/report.py``) see one
  :class:`~streamproc.monitor.windows.report.WindowReport` per partition and transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition
from opentelemetry.context import Context
from pydantic import ValidationError

from streamproc.contracts.events import AnswerOutcome, DeadLetterReason
from streamproc.kafka.changelog import changelog_records, restore_states
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.store import TrackedStore
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.live_accuracy import LiveAccuracy
from streamproc.monitor.windows.report import (
    AfterCommit,
    ExtensionState,
    InTransaction,
    WindowReport,
)
from streamproc.monitor.windows.table import (
    Closed,
    Counted,
    close_due,
    count_outcome,
    decode_entries,
    drop_legacy_entries,
    forget_expired_seen,
    rebuild_index,
    window_timing,
)
from streamproc.rates.judge_accuracy import JudgeAccuracy
from streamproc.telemetry import semconv
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.trace_headers import passthrough, traceparent_headers
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord

__all__ = ["SERIES_PER_TICK", "WindowLoop", "WindowLoopOptions"]

log = structlog.get_logger(__name__)

SERIES_PER_TICK = 500
"""Most series one tick closes, over all owned partitions (split evenly): with 10,000
steady keys on 3 partitions, at most 0.15 s of CPU per partition's share (BENCHMARKS.md,
"Window state")."""


@dataclass(frozen=True, slots=True)
class WindowLoopOptions:
    """What the window loop reads besides what every loop does
    (:class:`~streamproc.kafka.consumer.KafkaLoopOptions`); the composition root builds it
    once (:func:`streamproc.wiring.window_loop_options`)."""

    window: WindowSettings
    """``window.*``: the windows, the tick, what is late."""
    min_labels: int
    """``labels.min_labels``: labelled answers a cell needs before the corrected rate uses
    its live accuracy."""


class _Partition:
    """One owned outcome partition: its state and its schedule."""

    def __init__(self, store: TrackedStore, index: PartitionIndex) -> None:
        self.store = store
        self.index = index


class WindowLoop(ConsumerLoop):
    """Consume outcomes, keep windows, publish aggregates; see the module docstring.

    ``in_transaction`` / ``after_commit``: the hooks of ``windows/report.py``.
    ``late_events`` counts the outcomes written to the late topic since start.
    """

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        options: WindowLoopOptions,
        *,
        client_options: Mapping[str, Any] | None = None,
        telemetry: Telemetry | None = None,
        accuracy: JudgeAccuracy | None = None,
        live_accuracy: LiveAccuracy | None = None,
        judge_key: str | None = None,
        in_transaction: InTransaction | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        """``accuracy``: the judge's measured confusion counts the corrected rate uses
        (:func:`streamproc.wiring.measured_accuracy`); None publishes no corrected rate.
        ``live_accuracy``: the judge-accuracy table, read while the loop runs; a cell of
        judge ``judge_key`` (:func:`streamproc.wiring.judge_key_of`, required with it)
        with ``options.min_labels`` labelled answers corrects with its live counts."""
        if live_accuracy is not None and judge_key is None:
            raise ValueError("live_accuracy needs the judge_key of the judge whose cells to read")
        super().__init__(
            kafka,
            name="windows",
            topic=kafka.names.outcomes,
            client_options=client_options,
            consumer_options={"max_poll_records": 1000},
            producer_options={},
        )
        self._window = options.window
        self._timing = window_timing(
            options.window,
            max_event_age_s=kafka.worker.event_time_max_past_s,
            accuracy=accuracy,
            live=None
            if live_accuracy is None or judge_key is None
            else live_accuracy.for_judge(judge_key, min_labels=options.min_labels),
        )
        self._live_accuracy = live_accuracy
        self._longest_ms = max(spec.size_ms for spec in self._timing.specs)
        self._telemetry = telemetry or Telemetry.disabled()
        self._topics = kafka.outputs
        self._in_transaction = in_transaction
        self._after_commit = after_commit
        self._partitions: dict[int, _Partition] = {}
        self.counted = 0
        self.closed = 0
        self.late_events = 0
        self._last_tick = 0.0

    async def run(self) -> None:
        """As :meth:`ConsumerLoop.run`, with the live accuracy table followed meanwhile
        (caught up before the first window closes, within its timeout)."""
        live = self._live_accuracy
        if live is None:
            await super().run()
            return
        await live.start()
        try:
            await super().run()
        finally:
            await live.stop()

    # ------------------------------------------------------------------ one step

    async def _step(self) -> None:
        wait_s = min(self._kafka.worker.batch_wait_s * 4, self._window.tick_s)
        batch = await self._consumer.getmany(timeout_ms=int(wait_s * 1000))
        read_at = self._read_epoch
        now = time.time()
        tick = now - self._last_tick >= self._window.tick_s
        if not batch and not tick:
            return
        async with self._lock:
            if not self._admit(batch, read_at):
                return
            outbound: list[OutboundRecord] = []
            late: dict[int, list[AnswerOutcome]] = {}
            for tp, records in batch.items():
                outbound += self._count(tp, records, now, late.setdefault(tp.partition, []))
            closed: dict[int, Closed] = {}
            if tick:
                self._last_tick = now
                closed = self._close_due(now)
                outbound += self._aggregate_records(closed)
            reports = self._reports(now, tick, closed, late)
            if self._in_transaction is not None:
                for report in reports:
                    outbound += self._in_transaction(report)
            outbound += self._changelog_records()
            offsets = {tp: records[-1].offset + 1 for tp, records in batch.items() if records}
            if not outbound and not offsets:
                return
            await self._publisher.publish(outbound, offsets)
            self.watch.progress.acknowledged(offsets, time.monotonic())
            self.closed += sum(len(c.aggregates) for c in closed.values())
            self.late_events += sum(len(outcomes) for outcomes in late.values())
        self._committed(reports, closed)

    def _count(
        self,
        tp: TopicPartition,
        records: Sequence[ConsumerRecord[bytes, bytes]],
        now: float,
        late: list[AnswerOutcome],
    ) -> list[OutboundRecord]:
        """Count each outcome; the records it produces (dead letters, late outcomes)."""
        part = self._partitions.get(tp.partition)
        produced: list[OutboundRecord] = []
        for record in records:
            rejection: Rejection | None = None
            try:
                outcome = AnswerOutcome.model_validate(json.loads(record.value or b""))
            except (ValueError, ValidationError, RecursionError) as exc:
                rejection = Rejection(DeadLetterReason.SCHEMA_VIOLATION, f"bad outcome: {exc}")
            else:
                if part is None:  # cannot happen: partitions are restored on assignment
                    raise RuntimeError(f"outcome for unowned partition {tp}")
                try:
                    # A window whose end is not a datetime could never be closed.
                    _representable(outcome.occurred_at.timestamp() + self._longest_ms / 1000)
                    counted = count_outcome(
                        part.store, part.index, outcome, partition=tp.partition, now=now
                    )
                except Exception as exc:  # noqa: BLE001 - one outcome must not stop the windows
                    rejection = Rejection(
                        DeadLetterReason.PROCESSING_ERROR, f"outcome not counted: {exc!r}"
                    )
                else:
                    self.counted += counted is Counted.COUNTED
                    if counted is Counted.TOO_LATE:
                        late.append(outcome)
                        produced.append(self._late_record(record))
            if rejection is not None:
                origin = MessageOrigin(record.topic, record.partition, record.offset, record.key)
                letter = prepare_dead_letter(
                    self._topics.dead_letters,
                    rejection,
                    origin,
                    record.value,
                    headers=_handed_on(record),
                )
                log.warning(
                    "dead_letter", reason=letter.model.reason.value, error=letter.model.error
                )
                produced.append(letter.record)
        return produced

    def _late_record(self, record: ConsumerRecord[bytes, bytes]) -> OutboundRecord:
        """The outcome as the judging stage wrote it, to the late topic."""
        return self._topics.late.forward(record.key, record.value, headers=_handed_on(record))

    def _close_due(self, now: float) -> dict[int, Closed]:
        """Close what is due, at most :data:`SERIES_PER_TICK` series in all: when many
        keys close at once (every key's minute at the same boundary), the rest wait for
        the next tick, which comes at once, instead of one transaction holding the event
        loop for seconds."""
        closed: dict[int, Closed] = {}
        limit = max(50, SERIES_PER_TICK // max(1, len(self._partitions)))
        for partition, part in sorted(self._partitions.items()):
            closed[partition] = close_due(part.store, part.index, now, limit=limit)
            forget_expired_seen(part.store, part.index, now)
            if part.index.more_due(now):
                self._last_tick = 0.0  # tick again on the next step
        return closed

    def _aggregate_records(self, closed: Mapping[int, Closed]) -> list[OutboundRecord]:
        """Tumbling aggregates to the aggregates topic, hopping ones to the hopping topic,
        keyed by assistant id like the outcomes, with the trace headers of their closing."""
        aggregates = [item for done in closed.values() for item in done.aggregates]
        headers = self._closing_headers(len(aggregates))
        topics = self._topics
        return [
            (topics.aggregates if spec.tumbling else topics.hopping).record(
                aggregate, headers=headers
            )
            for spec, aggregate in aggregates
        ]

    def _reports(
        self,
        now: float,
        tick: bool,
        closed: Mapping[int, Closed],
        late: Mapping[int, list[AnswerOutcome]],
    ) -> list[WindowReport]:
        """One report per owned partition that had something happen (every one on a tick)."""
        reports = []
        for partition, part in sorted(self._partitions.items()):
            done = closed.get(partition, Closed())
            outcomes = late.get(partition, [])
            if not (tick or outcomes):
                continue
            reports.append(
                WindowReport(
                    partition=partition,
                    now=now,
                    tick=tick,
                    aggregates=tuple(aggregate for _, aggregate in done.aggregates),
                    deltas=tuple(done.deltas),
                    late=tuple(outcomes),
                    state=ExtensionState(part.store),
                )
            )
        return reports

    def _committed(self, reports: Sequence[WindowReport], closed: Mapping[int, Closed]) -> None:
        """After the transaction: the log lines and the ``after_commit`` hook."""
        for partition, done in closed.items():
            for spec, aggregate in done.aggregates:
                if spec.tumbling:
                    log.info(
                        "window_closed",
                        tenant=aggregate.tenant,
                        assistant_id=aggregate.assistant_id,
                        model=aggregate.model,
                        window_start=aggregate.window_start.isoformat(),
                        answers=aggregate.answers,
                        hallucinated=aggregate.hallucinated,
                        revision=aggregate.revision,
                        partition=partition,
                    )
        for report in reports:
            for outcome in report.late:
                log.warning(
                    "late_event",
                    tenant=outcome.tenant,
                    assistant_id=outcome.assistant_id,
                    model=outcome.model,
                    event_id=outcome.event_id,
                    occurred_at=outcome.occurred_at.isoformat(),
                    topic=self._kafka.names.late,
                )
            if self._after_commit is not None:
                try:
                    self._after_commit(report)
                except Exception:  # committed already: report it and go on
                    log.exception("window_after_commit_failed", partition=report.partition)

    def _closing_headers(self, aggregates: int) -> OutHeaders:
        """The ``traceparent`` of one span for closing ``aggregates`` windows (a new root:
        a window sums many answers' traces, so it continues none of them); none when
        nothing closed or telemetry is off."""
        if not aggregates or not self._telemetry.enabled:
            return ()
        span = self._telemetry.tracer.start_span(
            semconv.WINDOW_CLOSE_SPAN,
            context=Context(),
            attributes={
                semconv.MESSAGING_SYSTEM: semconv.MESSAGING_SYSTEM_KAFKA,
                semconv.MESSAGING_DESTINATION_NAME: self._kafka.names.aggregates,
                semconv.MESSAGING_BATCH_MESSAGE_COUNT: aggregates,
                semconv.MESSAGING_CONSUMER_GROUP_NAME: self.group_id,
            },
        )
        try:
            return traceparent_headers(span)
        finally:
            span.end()

    def _changelog_records(self) -> list[OutboundRecord]:
        """The state of outcome partition p lives in changelog partition p."""
        stores = ((partition, part.store) for partition, part in self._partitions.items())
        return changelog_records(self._topics.window_state, stores)

    # ------------------------------------------------------------------ rebalances

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._partitions.clear()

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        await self._restore(partitions)

    async def _restore(self, partitions: Iterable[TopicPartition]) -> None:
        topic = self._kafka.names.window_changelog
        started = time.monotonic()
        states = await restore_states(
            self._kafka, topic, (tp.partition for tp in partitions), self._client_options
        )
        for tp in partitions:
            state = states[tp.partition]
            store = TrackedStore(decode_entries(state))
            dropped, unreported = drop_legacy_entries(store)
            if dropped:
                # Their tombstones go out with the partition's next transaction.
                log.warning(
                    "window_state_legacy_dropped",
                    partition=tp.partition,
                    entries=dropped,
                    unreported_answers=unreported,
                )
            index = rebuild_index(store.items(), tp.partition, self._timing)
            self._partitions[tp.partition] = _Partition(store, index)
            log.info(
                "window_state_restored",
                partition=tp.partition,
                entries=len(store),
                queued=index.sizes(),
                seconds=round(time.monotonic() - started, 2),
            )


def _representable(timestamp: float) -> None:
    datetime.fromtimestamp(timestamp, UTC)


def _handed_on(record: ConsumerRecord[bytes, bytes]) -> OutHeaders:
    """The trace headers of an outcome, for the records written for it."""
    return passthrough(record.headers or ())[1]
