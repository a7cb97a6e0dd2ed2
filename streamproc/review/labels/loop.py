"""The labels loop: review items and reviewers' labels in, accepted labels' audit entries
and their cells' deltas out, exactly once on Kafka.

- It reads the review queue and the labels topic, both keyed by answer id with the same
  partition count, under the range assignor: partition N of both goes to the same
  member, so an answer's item and its labels meet in one loop (a co-partitioned join).
- Partition N's join state (:mod:`~streamproc.review.labels.join`: item summaries, the
  labels accepted, labels waiting for their item) lives in memory and is changelogged to
  partition N of a compacted topic; a member that takes the partition over restores it
  from there before reading on, as the window loop does.
- A batch's audit entries, deltas, dead letters, changelog changes and input offsets go
  out in one Kafka transaction. Every bad input is a dead letter (a label whose item
  never comes too, after ``labels.wait_for_outcome_s``, with its original bytes); none
  stops the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import ConsumerRecord
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.label_events import ReviewItem
from streamproc.kafka.changelog import changelog_records, restore_states
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.store import TrackedStore
from streamproc.review.labels.inputs import parse_input
from streamproc.review.labels.join import (
    Accepted,
    Duplicate,
    EntryTooLarge,
    Handled,
    LabelJoin,
    MayLabel,
    Rejected,
)
from streamproc.review.options import LabelSettings
from streamproc.telemetry.sensors import AccuracySensor
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.output_topic import RecordTooLarge
from streamproc.verdicts.record import OutboundRecord

__all__ = ["SWEEP_EVERY_S", "LabelsLoop"]

log = structlog.get_logger(__name__)

SWEEP_EVERY_S = 600.0
"""How often review items past ``labels.retain_days`` are looked for."""
_DAY_S = 24 * 3600.0


class LabelsLoop(ConsumerLoop):
    """Join labels with review items; see the module docstring.

    ``may_label(reviewer, tenant)``: whether a reviewer may label a tenant's answers
    (the worker builds it from ``review.tokens_file``); None refuses every label.
    ``clock``: seconds since the epoch, for the labels' wait and the items' retention.
    """

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        labels: LabelSettings,
        *,
        client_options: Mapping[str, Any] | None = None,
        sensor: AccuracySensor | None = None,
        clock: Callable[[], float] = time.time,
        may_label: MayLabel | None = None,
    ) -> None:
        """``kafka.names``: the review queue and labels topics read, and the changelog;
        ``labels``: how long a label waits for its item and an item is kept."""
        self._labels = labels
        self._queue_topic = kafka.names.review_queue
        self._labels_topic = kafka.names.labels
        super().__init__(
            kafka,
            name="labels",
            topic=(self._queue_topic, self._labels_topic),
            client_options=client_options,
            consumer_options={
                "max_poll_records": 500,
                # Partition N of both topics to one member: the join needs both.
                "partition_assignment_strategy": (RangePartitionAssignor,),
            },
            producer_options={},
        )
        self._outputs = kafka.outputs
        self._sensor = sensor
        self._clock = clock
        self._may_label = may_label
        self._joins: dict[int, tuple[TrackedStore, LabelJoin]] = {}
        self._last_sweep = 0.0
        self.accepted = 0
        self.rejected = 0

    # ------------------------------------------------------------------ one step

    async def _step(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=int(self._kafka.worker.batch_wait_s * 4000))
        read_at = self._read_epoch
        now = self._clock()
        async with self._lock:
            if not self._admit(batch, read_at):
                return
            handled: list[Handled] = []
            outbound: list[OutboundRecord] = []
            # Items first: labels of the same batch then find them.
            for tp in sorted(batch, key=lambda tp: (tp.topic != self._queue_topic, tp)):
                outbound += self._handle(tp, batch[tp], now, handled)
            for _, join in self._joins.values():
                handled += join.expire(now)
            if now - self._last_sweep >= SWEEP_EVERY_S:
                self._last_sweep = now
                for _, join in self._joins.values():
                    join.sweep(now)
            outbound += self._records(handled, now)
            outbound += self._changelog_records()
            offsets = {tp: records[-1].offset + 1 for tp, records in batch.items() if records}
            if not outbound and not offsets:
                return
            await self._publisher.publish(outbound, offsets)
            self.watch.progress.acknowledged(offsets, time.monotonic())
        self._committed(handled)

    def _handle(
        self,
        tp: TopicPartition,
        records: Sequence[ConsumerRecord[bytes, bytes]],
        now: float,
        handled: list[Handled],
    ) -> list[OutboundRecord]:
        """Join each record; the dead letters of review items it could not keep."""
        owned = self._joins.get(tp.partition)
        if owned is None:  # cannot happen: partitions are restored on assignment
            raise RuntimeError(f"record of unowned partition {tp}")
        join = owned[1]
        letters: list[OutboundRecord] = []
        for record in records:
            origin = MessageOrigin(record.topic, record.partition, record.offset, record.key)
            rejection: Rejection | None = None
            try:
                if tp.topic == self._labels_topic:
                    handled.append(join.label(record.value, origin, now))
                    continue
                item = parse_input(ReviewItem, record.value, "review item")
                if isinstance(item, Rejection):
                    rejection = item
                else:
                    handled += join.item(item, now)
            except EntryTooLarge as exc:
                rejection = Rejection(DeadLetterReason.PROCESSING_ERROR, str(exc))
            except Exception as exc:  # one record must not stop the join
                log.exception("labels_join_failed", topic=record.topic, offset=record.offset)
                rejection = Rejection(DeadLetterReason.PROCESSING_ERROR, f"not joined: {exc!r}")
            if rejection is not None:
                letters.append(self._dead_letter(rejection, origin, record.value, now))
        return letters

    def _records(self, handled: Sequence[Handled], now: float) -> list[OutboundRecord]:
        outputs = self._outputs
        records: list[OutboundRecord] = []
        for done in handled:
            if isinstance(done, Accepted):
                try:
                    accepted = [
                        outputs.label_audit.record(done.audit),
                        outputs.label_deltas.record(done.delta),
                    ]
                except RecordTooLarge as exc:  # one label must not stop the loop
                    origin = MessageOrigin(
                        self._labels_topic, -1, -1, done.label.answer_id.encode()
                    )
                    rejection = Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, str(exc))
                    label = done.label.model_dump_json().encode()
                    accepted = [self._dead_letter(rejection, origin, label, now)]
                records += accepted
            elif isinstance(done, Rejected):
                records.append(self._dead_letter(done.rejection, done.origin, done.value, now))
        return records

    def _dead_letter(
        self, rejection: Rejection, origin: MessageOrigin, value: bytes | None, now: float
    ) -> OutboundRecord:
        letter = prepare_dead_letter(
            self._outputs.dead_letters,
            rejection,
            origin,
            value,
            now=datetime.fromtimestamp(now, UTC),
        )
        log.warning("dead_letter", reason=letter.model.reason.value, error=letter.model.error)
        return letter.record

    def _committed(self, handled: Sequence[Handled]) -> None:
        """After the transaction: counts, log lines, the sensor."""
        for done in handled:
            outcome: str | None = None
            if isinstance(done, Accepted):
                self.accepted += 1
                outcome = "accepted"
                log.info(
                    "label_accepted",
                    answer_id=done.label.answer_id,
                    label_id=done.label.label_id,
                    reviewer=done.label.reviewer,
                    cell=done.delta.cell.key,
                    agrees_with_judge=done.audit.agrees_with_judge,
                )
            elif isinstance(done, Duplicate):
                outcome = "duplicate"
            elif isinstance(done, Rejected):
                self.rejected += 1
                outcome = done.outcome
            if outcome is not None and self._sensor is not None:
                try:
                    self._sensor.label(outcome)
                except Exception:  # committed already: report it and go on
                    log.exception("labels_sensor_failed")

    def _changelog_records(self) -> list[OutboundRecord]:
        """The state of input partition p lives in changelog partition p."""
        stores = ((partition, store) for partition, (store, _) in self._joins.items())
        return changelog_records(self._outputs.labels_state, stores)

    # ------------------------------------------------------------------ rebalances

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._joins.clear()

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        by_topic: dict[str, set[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        queue, labels = by_topic.get(self._queue_topic, set()), by_topic.get(self._labels_topic)
        if queue != (labels or set()):
            log.error(
                "labels_join_not_copartitioned",
                queue_partitions=sorted(queue),
                labels_partitions=sorted(labels or set()),
                hint="the review queue and labels topics need the same partition count",
            )
        await self._restore(sorted({tp.partition for tp in partitions}))

    async def _restore(self, partitions: Iterable[int]) -> None:
        topic = self._kafka.names.labels_changelog
        started = time.monotonic()
        states = await restore_states(self._kafka, topic, partitions, self._client_options)
        for partition, state in states.items():
            store = TrackedStore(state)
            join = LabelJoin(
                store,
                wait_s=self._labels.wait_for_outcome_s,
                retain_s=self._labels.retain_days * _DAY_S,
                may_label=self._may_label,
                max_entry_bytes=self._outputs.labels_state.max_bytes,
            )
            self._joins[partition] = (store, join)
            log.info(
                "labels_state_restored",
                partition=partition,
                entries=len(store),
                waiting=join.waiting(),
                seconds=round(time.monotonic() - started, 2),
            )
