"""The labels loop's handling of one batch, without a broker: what it would publish for
review items and labels (audit entries, deltas, dead letters, changelog entries on the
input's partition), and that a record it cannot handle costs only a dead letter."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, DeadLetterReason
from streamproc.contracts.label_events import LabelAuditEntry, LabelDelta
from streamproc.kafka.store import TrackedStore
from streamproc.kafka.topics import labels_changelog_topic
from streamproc.review.labels.join import Handled, LabelJoin, item_key
from streamproc.review.labels.loop import LabelsLoop
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import kafka_loop_options
from tests.unit.review.labels.test_join import T0, label_bytes, may_label, review_item

SETTINGS = Settings(app_id="unit")
QUEUE = TopicPartition(SETTINGS.review.queue_topic, 2)
LABELS = TopicPartition(SETTINGS.review.labels_topic, 2)


def _loop() -> LabelsLoop:
    loop = LabelsLoop(
        kafka_loop_options(SETTINGS), SETTINGS.labels, may_label=may_label, clock=lambda: T0
    )
    store = TrackedStore()
    loop._joins[2] = (
        store,
        LabelJoin(
            store, wait_s=60.0, retain_s=86400.0, may_label=may_label, max_entry_bytes=1 << 20
        ),
    )
    return loop


def _records(tp: TopicPartition, *values: bytes | None) -> list[ConsumerRecord[Any, Any]]:
    return [
        ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, b"a1", value, None, 0, 0, [])
        for offset, value in enumerate(values)
    ]


def _batch(loop: LabelsLoop, tp: TopicPartition, *values: bytes | None) -> list[OutboundRecord]:
    handled: list[Handled] = []
    out = loop._handle(tp, _records(tp, *values), T0, handled)
    return out + loop._records(handled, T0) + loop._changelog_records()


def _by_topic(records: list[OutboundRecord]) -> dict[str, list[OutboundRecord]]:
    found: dict[str, list[OutboundRecord]] = {}
    for record in records:
        found.setdefault(record.topic, []).append(record)
    return found


def test_items_and_labels_become_audit_entries_deltas_and_changelog_entries() -> None:
    loop = _loop()
    item = review_item().model_dump_json().encode()
    first = _by_topic(_batch(loop, QUEUE, b"{oops", item, item))
    (letter,) = first[SETTINGS.topics.dead_letter]
    dead = DeadLetter.model_validate_json(letter.value or b"")
    assert (dead.reason, dead.offset, dead.topic) == (DeadLetterReason.BAD_JSON, 0, QUEUE.topic)
    assert dead.received_at == datetime.fromtimestamp(T0, UTC)
    (entry,) = first[labels_changelog_topic(SETTINGS.app_id)]  # the repeated item changed nothing
    assert (entry.key, entry.partition) == (item_key("acme", "a1").encode(), 2)

    second = _by_topic(_batch(loop, LABELS, label_bytes()))
    (audit,) = second[SETTINGS.audit.topic]
    assert audit.key == b"label:a1:l1"
    assert LabelAuditEntry.model_validate_json(audit.value or b"").agrees_with_judge is True
    (delta,) = second[SETTINGS.labels.deltas_topic]
    assert delta.key == b"acme/bot/Summary/rules"
    assert LabelDelta.model_validate_json(delta.value or b"").tp.w == 1.0
    (entry,) = second[labels_changelog_topic(SETTINGS.app_id)]
    assert entry.partition == 2 and [
        label["label_id"] for label in json.loads(entry.value or b"")["labels"]
    ] == ["l1"]
    assert SETTINGS.topics.dead_letter not in second


def test_each_record_the_join_fails_on_is_its_own_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = _loop()
    store, join = loop._joins[2]

    def broken(*_: object) -> Handled:
        raise RuntimeError("state is broken")

    monkeypatch.setattr(join, "label", broken)
    out = _by_topic(_batch(loop, LABELS, label_bytes(), label_bytes("l2")))
    assert len(out[SETTINGS.topics.dead_letter]) == 2  # each record its own dead letter
    dead = DeadLetter.model_validate_json(out[SETTINGS.topics.dead_letter][1].value or b"")
    assert dead.offset == 1
    assert dead.reason is DeadLetterReason.PROCESSING_ERROR and "state is broken" in dead.error
    assert not store


def test_an_accepted_label_whose_audit_entry_cannot_fit_is_a_dead_letter() -> None:
    """The audit topic's limit (8 MiB) bounds entries by construction; should one still
    not fit, the label becomes a dead letter with its bytes and the loop goes on."""
    loop = _loop()
    audit = loop._outputs.label_audit
    loop._outputs = replace(
        loop._outputs, label_audit=OutputTopic(audit.name, 1500, audit.key, audit.fit)
    )
    out = _by_topic(
        _batch(loop, QUEUE, review_item().model_dump_json().encode())
        + _batch(loop, LABELS, label_bytes())
    )
    assert SETTINGS.audit.topic not in out
    assert SETTINGS.labels.deltas_topic not in out
    [letter_record] = out[SETTINGS.topics.dead_letter]
    letter = DeadLetter.model_validate_json(letter_record.value or b"")
    assert letter.reason == DeadLetterReason.OUTPUT_TOO_LARGE
    assert letter.topic == SETTINGS.review.labels_topic
    assert "does not fit" in letter.error
    assert json.loads(base64.b64decode(letter.value_b64))["label_id"] == "l1"
