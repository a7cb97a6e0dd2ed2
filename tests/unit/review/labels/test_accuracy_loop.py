"""The accuracy loop's handling of deltas, without a broker: each changed cell's accuracy
event, a drift alert when the findings appear and when they clear (once each), a bad
delta costing only a dead letter, and the cell's state surviving its changelog."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, DeadLetterReason
from streamproc.contracts.label_events import (
    AccuracyCell,
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    LabelDelta,
    Tally,
)
from streamproc.kafka.store import TrackedStore, encode_entry
from streamproc.kafka.topics import accuracy_changelog_topic
from streamproc.rates.live_accuracy import CellState
from streamproc.review.labels.accuracy_loop import NEXT_OFFSET_KEY, AccuracyLoop, _Cell
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import kafka_loop_options

SETTINGS = Settings(app_id="unit", labels={"drift_min_labels": 5})
DELTAS = TopicPartition(SETTINGS.labels.deltas_topic, 1)
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()
CELL = AccuracyCell(tenant="acme", assistant_id="bot", task_type="Summary", judge_key="rules")
ONE = Tally(n=1.0, w=1.0, w2=1.0)


def _delta(index: int, kind: str) -> bytes:
    delta = LabelDelta(
        cell=CELL,
        answer_id=f"a{index}",
        label_id=f"l{index}",
        answer_day=date(2026, 12, 1),
        labelled_at=datetime(2026, 12, 2, tzinfo=UTC),
        new_answer=True,
        **{kind: ONE},
    )
    return delta.model_dump_json().encode()


class _Harness:
    def __init__(self, settings: Settings = SETTINGS) -> None:
        self.loop = AccuracyLoop(kafka_loop_options(settings), settings.labels, clock=lambda: NOW)
        self.loop._stores[1] = TrackedStore()
        self.offset = 0

    def batch(self, *values: bytes, offset: int | None = None) -> dict[str, list[OutboundRecord]]:
        if offset is not None:
            self.offset = offset
        records = []
        for value in values:
            records.append(
                ConsumerRecord(DELTAS.topic, 1, self.offset, 0, 0, b"k", value, None, 0, 0, [])
            )
            self.offset += 1
        changed: dict[tuple[int, str], Any] = {}
        out, _ = self.loop._apply(DELTAS, records, NOW, changed)
        published = self.loop._publish_cells(changed.values(), NOW)
        out += [self.loop._outputs.judge_accuracy.record(e) for e in published.events]
        out += [self.loop._alerts.record(a) for a in published.alerts]
        out += self.loop._changelog_records()
        found: dict[str, list[OutboundRecord]] = {}
        for record in out:
            found.setdefault(record.topic, []).append(record)
        return found


def _event(out: dict[str, list[OutboundRecord]]) -> JudgeAccuracyEvent:
    (record,) = out[SETTINGS.labels.accuracy_topic]
    assert record.key == CELL.key.encode()
    return JudgeAccuracyEvent.model_validate_json(record.value or b"")


def _alerts(out: dict[str, list[OutboundRecord]]) -> list[JudgeDriftAlert]:
    records = out.get(SETTINGS.alerts.topic, [])
    assert all(r.key == b"acme/bot" for r in records)
    return [JudgeDriftAlert.model_validate_json(r.value or b"") for r in records]


def test_missed_hallucinations_fire_a_drift_alert_once_and_resolve_it() -> None:
    harness = _Harness()
    out = harness.batch(*[_delta(i, "fn") for i in range(6)], b"not json")
    event = _event(out)
    assert (event.labelled_answers, event.labels, event.fn.w) == (6, 6, 6.0)
    assert event.sensitivity.estimate == 0.0 and event.offline_sensitivity is not None
    assert event.drift == ["sensitivity_below_offline"]
    (firing,) = _alerts(out)
    assert (firing.state, firing.alert_id) == ("firing", "judge_drift:acme/bot/Summary/rules")
    (letter,) = out[SETTINGS.topics.dead_letter]
    dead = DeadLetter.model_validate_json(letter.value or b"")
    assert (dead.reason, dead.offset) == (DeadLetterReason.BAD_JSON, 6)

    again = harness.batch(_delta(6, "fn"))
    assert _event(again).drift == ["sensitivity_below_offline"] and not _alerts(again)

    caught = harness.batch(*[_delta(100 + i, "tp") for i in range(80)])
    assert _event(caught).drift == []
    (resolved,) = _alerts(caught)
    assert (resolved.state, resolved.alert_id) == ("resolved", firing.alert_id)


def test_a_cells_state_comes_back_from_its_changelog_entry() -> None:
    harness = _Harness()
    out = harness.batch(_delta(1, "tp"), _delta(2, "fp"))
    (entry,) = out[accuracy_changelog_topic(SETTINGS.app_id)]
    assert entry.key == CELL.key.encode() and entry.partition == 1
    back = _Cell.from_json(json.loads(entry.value or b""))
    assert back.cell == CELL
    assert (back.state.tp, back.state.fp, back.state.labels) == (ONE, ONE, 2)
    # Written again as it was read: the restored state encodes the same.
    assert encode_entry(CELL.key, back)[1] == entry.value
    assert isinstance(back.state, CellState)


def test_without_transactions_redelivered_deltas_are_not_counted_twice() -> None:
    harness = _Harness(SETTINGS.model_copy(update={"broker_flavour": "tansu"}))
    assert not harness.loop.transactional
    first = harness.batch(_delta(1, "tp"), _delta(2, "tp"))
    mark = first[accuracy_changelog_topic(SETTINGS.app_id)][-1]
    assert (mark.key, mark.value, mark.partition) == (NEXT_OFFSET_KEY.encode(), b"2", 1)
    # A crash before the offsets were committed: the same two come again, then a new one.
    again = harness.batch(_delta(1, "tp"), _delta(2, "tp"), _delta(3, "fp"), offset=0)
    assert (_event(again).labels, _event(again).tp.w, _event(again).fp.w) == (3, 2.0, 1.0)


class _Sensor:
    def __init__(self) -> None:
        self.events: list[JudgeAccuracyEvent] = []

    def accuracy(self, event: JudgeAccuracyEvent) -> None:
        self.events.append(event)

    def drift(self, alert: JudgeDriftAlert) -> None:
        raise AssertionError("a report is not an alert")

    def label(self, outcome: str) -> None:
        raise AssertionError("no labels here")


def test_owned_cells_are_reported_again_without_being_published() -> None:
    harness = _Harness()
    harness.batch(_delta(1, "tp"), _delta(2, "fn"))
    sensor = _Sensor()
    harness.loop._sensor = sensor
    harness.loop._report_owned()  # as after a restore, and every REPORT_EVERY_S
    (event,) = sensor.events
    assert event.cell == CELL and event.labels == 2
    assert (event.tp.w, event.fn.w) == (1.0, 1.0)
    assert harness.loop._changelog_records() == []  # nothing changed, nothing written
