"""The accuracy loop: label deltas in, the judge's live accuracy per cell out, with drift
alerts, exactly once on Kafka.

The deltas topic is keyed by the cell (tenant / assistant / task type / judge key), so
one cell's deltas meet in one partition. Each owned partition's cells
(:class:`~streamproc.rates.live_accuracy.CellState`) live in memory and are
changelogged to a compacted topic (without transactions, with the next offset to
apply), restored on assignment like the window state. After
each batch, every cell it changed is published on the (compacted) judge-accuracy topic -
the latest event per cell is its truth - and, when its drift findings appear, change or
clear, a ``judge_drift`` alert on the alerts topic; with the changelog changes and the
input offsets in one Kafka transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.label_events import (
    AccuracyCell,
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    LabelDelta,
)
from streamproc.kafka.changelog import changelog_records, restore_states
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.store import TrackedStore
from streamproc.rates.corrected_rate import ConfusionCounts
from streamproc.rates.judge_accuracy import judge_accuracy
from streamproc.rates.live_accuracy import (
    CellState,
    accuracy_event,
    apply_delta,
    drift_findings,
    prune_days,
    step_drift,
)
from streamproc.review.labels.inputs import parse_input
from streamproc.review.options import LabelSettings
from streamproc.telemetry.sensors import AccuracySensor
from streamproc.verdicts.catalog import OutputTopics
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.record import OutboundRecord

__all__ = ["NEXT_OFFSET_KEY", "AccuracyLoop", "drift_alert_topic"]

log = structlog.get_logger(__name__)

NEXT_OFFSET_KEY = "next-offset"
"""The changelog key of the next delta offset to apply (a cell key always holds '/'),
kept on a broker without transactions only: there the state can reach the changelog
before the offsets are committed, and deltas redelivered after a crash must not count
twice. (With transactions the two commit together.)"""

REPORT_EVERY_S: Final = 300.0
"""How often the owned cells are reported to the sensor while no label arrives: well
inside the metrics' expiry of a cell (an hour), so only a cell that moved away goes."""


def drift_alert_topic(outputs: OutputTopics) -> OutputTopic[JudgeDriftAlert]:
    """Drift alerts go where the rate alerts go (``alerts.topic``, its size limit; key
    ``tenant/assistant``)."""
    return OutputTopic(outputs.alerts.name, outputs.alerts.max_bytes, _drift_key)


def _drift_key(alert: JudgeDriftAlert) -> bytes:
    return f"{alert.tenant}/{alert.assistant_id}".encode()


@dataclass(slots=True)
class _Cell:
    """One cell's changelog entry: the cell and its state."""

    cell: AccuracyCell
    state: CellState

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell.model_dump(mode="json"), "state": self.state.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Cell:
        return cls(AccuracyCell.model_validate(data["cell"]), CellState.from_json(data["state"]))


@dataclass(frozen=True, slots=True)
class _Published:
    events: list[JudgeAccuracyEvent]
    alerts: list[JudgeDriftAlert]


class AccuracyLoop(ConsumerLoop):
    """Keep each cell's live accuracy; see the module docstring.

    ``clock``: seconds since the epoch - the day the drift test's recent period ends on,
    and the events' ``measured_at``.
    """

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        labels: LabelSettings,
        *,
        client_options: Mapping[str, Any] | None = None,
        sensor: AccuracySensor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``kafka.names``: the deltas topic read and the changelog; ``labels``: the
        drift test's periods and bounds."""
        self._labels = labels
        super().__init__(
            kafka,
            name="accuracy",
            topic=kafka.names.label_deltas,
            client_options=client_options,
            consumer_options={"max_poll_records": 1000},
            producer_options={},
        )
        self._outputs = kafka.outputs
        self._alerts = drift_alert_topic(kafka.outputs)
        self._sensor = sensor
        self._clock = clock
        self._stores: dict[int, TrackedStore] = {}
        self._offline: dict[tuple[str, str], ConfusionCounts | None] = {}
        self.applied = 0
        self._reported_at = 0.0

    # ------------------------------------------------------------------ one step

    async def _step(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=int(self._kafka.worker.batch_wait_s * 4000))
        read_at = self._read_epoch
        if self._clock() - self._reported_at >= REPORT_EVERY_S:
            self._report_owned()
        if not batch:
            return
        now = self._clock()
        async with self._lock:
            if not self._admit(batch, read_at):
                return
            outbound: list[OutboundRecord] = []
            changed: dict[tuple[int, str], _Cell] = {}
            applied = 0
            for tp, records in batch.items():
                letters, done = self._apply(tp, records, now, changed)
                outbound += letters
                applied += done
            published = self._publish_cells(changed.values(), now)
            outbound += [self._outputs.judge_accuracy.record(e) for e in published.events]
            outbound += [self._alerts.record(a) for a in published.alerts]
            outbound += self._changelog_records()
            offsets = {tp: records[-1].offset + 1 for tp, records in batch.items() if records}
            await self._publisher.publish(outbound, offsets)
            self.watch.progress.acknowledged(offsets, time.monotonic())
            self.applied += applied
        self._committed(published)

    def _apply(
        self,
        tp: TopicPartition,
        records: Sequence[ConsumerRecord[bytes, bytes]],
        now: float,
        changed: dict[tuple[int, str], _Cell],
    ) -> tuple[list[OutboundRecord], int]:
        """Apply each delta to its cell; the dead letters of those that were not."""
        store = self._stores.get(tp.partition)
        if store is None:  # cannot happen: partitions are restored on assignment
            raise RuntimeError(f"delta of unowned partition {tp}")
        letters: list[OutboundRecord] = []
        applied = 0
        marked = not self.transactional
        applied_up_to: int = store.get(NEXT_OFFSET_KEY, 0) if marked else 0
        for record in records:
            if record.offset < applied_up_to:
                continue  # redelivered after a crash before its offsets were committed
            delta = parse_input(LabelDelta, record.value, "label delta")
            if isinstance(delta, LabelDelta):
                key = delta.cell.key
                entry: _Cell | None = store.get(key)
                try:
                    if entry is None:
                        entry = _Cell(delta.cell, CellState())
                    state = CellState.from_json(entry.state.to_json())  # applied on a copy
                    apply_delta(state, delta)
                except Exception as exc:  # noqa: BLE001 - one delta must not stop the loop
                    delta = Rejection(DeadLetterReason.PROCESSING_ERROR, f"not applied: {exc!r}")
                else:
                    entry = _Cell(entry.cell, state)
                    store[key] = entry
                    changed[(tp.partition, key)] = entry
                    applied += 1
                    continue
            origin = MessageOrigin(record.topic, record.partition, record.offset, record.key)
            letter = prepare_dead_letter(
                self._outputs.dead_letters,
                delta,
                origin,
                record.value,
                now=datetime.fromtimestamp(now, UTC),
            )
            log.warning("dead_letter", reason=letter.model.reason.value, error=letter.model.error)
            letters.append(letter.record)
        if records and marked:
            store[NEXT_OFFSET_KEY] = records[-1].offset + 1
        return letters, applied

    def _publish_cells(self, cells: Iterable[_Cell], now: float) -> _Published:
        """Each changed cell's accuracy event, and its drift alert where that moved."""
        labels = self._labels
        at = datetime.fromtimestamp(now, UTC)
        today = at.date()
        published = _Published([], [])
        for entry in cells:
            cell, state = entry.cell, entry.state
            prune_days(
                state, today=today, keep_days=labels.drift_recent_days + labels.drift_baseline_days
            )
            offline = self._offline_counts(cell)
            findings = drift_findings(
                state,
                offline=offline,
                today=today,
                min_labels=labels.drift_min_labels,
                recent_days=labels.drift_recent_days,
                baseline_days=labels.drift_baseline_days,
                z=labels.drift_z,
            )
            event = accuracy_event(cell, state, offline=offline, findings=findings, now=at)
            published.events.append(event)
            alert = step_drift(cell, state, event, now=at)  # updates state.drift_firing
            if alert is not None:
                published.alerts.append(alert)
        return published

    def _offline_counts(self, cell: AccuracyCell) -> ConfusionCounts | None:
        """The shipped benchmark counts of the cell's judge and task type, if measured."""
        key = (cell.judge_key, cell.task_type)
        if key not in self._offline:
            measured = judge_accuracy(cell.judge_key)
            self._offline[key] = None if measured is None else measured.for_task(cell.task_type)
        return self._offline[key]

    def _committed(self, published: _Published) -> None:
        """After the transaction: log lines and the sensor."""
        for alert in published.alerts:
            log.warning(
                "judge_drift",
                state=alert.state,
                cell=alert.cell.key,
                findings=alert.findings,
                sensitivity=alert.sensitivity,
                precision=alert.precision,
            )
        sensor = self._sensor
        if sensor is None:
            return
        try:
            for event in published.events:
                sensor.accuracy(event)
            for alert in published.alerts:
                sensor.drift(alert)
        except Exception:  # committed already: report it and go on
            log.exception("accuracy_sensor_failed")

    def _report_owned(self) -> None:
        """Every owned cell to the sensor again, published or not: its gauges expire when
        a worker stops updating them (the cell moved to another worker), so the owner
        refreshes them - after a restore, and every ``REPORT_EVERY_S`` while labels are
        quiet. Nothing is published: the compacted topic already holds each cell's latest
        event."""
        self._reported_at = now = self._clock()
        sensor = self._sensor
        if sensor is None:
            return
        at = datetime.fromtimestamp(now, UTC)
        try:
            for store in self._stores.values():
                for key, entry in store.items():
                    if key == NEXT_OFFSET_KEY:
                        continue
                    findings = list(entry.state.drift_firing)
                    offline = self._offline_counts(entry.cell)
                    sensor.accuracy(
                        accuracy_event(
                            entry.cell, entry.state, offline=offline, findings=findings, now=at
                        )
                    )
        except Exception:  # a sensor must not stop the loop
            log.exception("accuracy_sensor_failed")

    def _changelog_records(self) -> list[OutboundRecord]:
        """The state of delta partition p lives in changelog partition p."""
        return changelog_records(self._outputs.accuracy_state, self._stores.items())

    # ------------------------------------------------------------------ rebalances

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._stores.clear()

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        topic = self._kafka.names.accuracy_changelog
        started = time.monotonic()
        states = await restore_states(
            self._kafka, topic, (tp.partition for tp in partitions), self._client_options
        )
        for tp in partitions:
            state = states[tp.partition]
            cells: dict[str, Any] = {}
            for key, value in state.items():
                if key == NEXT_OFFSET_KEY:
                    cells[key] = int(value)
                    continue
                try:
                    cells[key] = _Cell.from_json(value)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("accuracy_state_unreadable", key=key, error=repr(exc))
            self._stores[tp.partition] = TrackedStore(cells)
            log.info(
                "accuracy_state_restored",
                partition=tp.partition,
                cells=len(cells) - (NEXT_OFFSET_KEY in cells),
                seconds=round(time.monotonic() - started, 2),
            )
        self._report_owned()  # the gauges of the cells this worker now owns
