"""The labels and accuracy loops on real Kafka: labels arriving before and after their
review item are both counted, with inverse-probability weights; a restart of both loops
restores their state (a label for an item seen before the restart is accepted, a
redelivered one is not counted again, the cell's counts go on); a label for an unknown
answer and one from a reviewer for another tenant become dead letters with their
original bytes, offsets committed; partition N of the queue and of the labels goes to
one member of the group."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, DeadLetterReason
from streamproc.contracts.label_events import JudgeAccuracyEvent, LabelAuditEntry, LabelDelta
from streamproc.kafka.clients import publish_raw
from streamproc.kafka.topics import ensure_topics, review_topic_specs, topic_specs
from streamproc.review.labels.accuracy_loop import AccuracyLoop
from streamproc.review.labels.loop import LabelsLoop
from streamproc.verdicts.catalog import LABEL_KEY_PREFIX
from streamproc.wiring import kafka_loop_options, topic_layout
from tests.integration.running import RunningLoops
from tests.unit.review.labels.test_join import label_bytes, may_label, review_item


def _settings(bootstrap: str, *, partitions: int = 2) -> Settings:
    run = uuid.uuid4().hex[:8]
    return Settings(
        app_id=f"lab-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={"dead_letter": f"lab-{run}.dead-letter", "partitions": partitions},
        audit={"topic": f"lab-{run}.audit"},
        alerts={"topic": f"lab-{run}.alerts"},
        review={"queue_topic": f"lab-{run}.review-queue", "labels_topic": f"lab-{run}.labels"},
        labels={
            "deltas_topic": f"lab-{run}.deltas",
            "accuracy_topic": f"lab-{run}.accuracy",
            "wait_for_outcome_s": 2.0,
        },
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 6.0, "batch_wait_s": 0.05},
    )


async def _create_topics(settings: Settings) -> None:
    wanted = {settings.topics.dead_letter, settings.audit.topic, settings.alerts.topic}
    specs = [spec for spec in topic_specs(topic_layout(settings)) if spec.name in wanted]
    await ensure_topics(
        settings.bootstrap_servers,
        review_topic_specs(topic_layout(settings)) + specs,
        settings.security,
    )


class _Outputs:
    """A read_committed reader of everything the two loops write."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.consumer = AIOKafkaConsumer(
            settings.audit.topic,
            settings.labels.deltas_topic,
            settings.labels.accuracy_topic,
            settings.topics.dead_letter,
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            metadata_max_age_ms=1000,
        )
        self.audit: list[LabelAuditEntry] = []
        self.deltas: list[LabelDelta] = []
        self.accuracy: list[JudgeAccuracyEvent] = []
        self.dead: list[DeadLetter] = []

    async def until(self, done: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for tp, records in (await self.consumer.getmany(timeout_ms=300)).items():
                for record in records:
                    self._add(tp.topic, record.key or b"", record.value or b"")
            if done():
                return
        pytest.fail(
            f"timed out waiting for {what}: {len(self.audit)} audit entries, "
            f"{len(self.deltas)} deltas, accuracy {self.accuracy[-1:]}, dead {self.dead}"
        )

    def _add(self, topic: str, key: bytes, value: bytes) -> None:
        settings = self.settings
        if topic == settings.audit.topic:
            assert key.startswith(LABEL_KEY_PREFIX.encode())
            self.audit.append(LabelAuditEntry.model_validate_json(value))
        elif topic == settings.labels.deltas_topic:
            self.deltas.append(LabelDelta.model_validate_json(value))
        elif topic == settings.labels.accuracy_topic:
            self.accuracy.append(JudgeAccuracyEvent.model_validate_json(value))
        else:
            self.dead.append(DeadLetter.model_validate_json(value))

    def latest(self) -> JudgeAccuracyEvent | None:
        return self.accuracy[-1] if self.accuracy else None


def _accuracy(settings: Settings) -> AccuracyLoop:
    return AccuracyLoop(kafka_loop_options(settings), settings.labels)


def _labels(
    settings: Settings, *, clock: Callable[[], float] = time.time, instance: str = "one"
) -> LabelsLoop:
    slot = settings.model_copy(
        update={"worker": settings.worker.model_copy(update={"instance_id": instance})}
    )
    return LabelsLoop(kafka_loop_options(slot), slot.labels, may_label=may_label, clock=clock)


async def _send(settings: Settings, topic: str, *records: tuple[str, bytes]) -> None:
    await publish_raw(
        settings.bootstrap_servers, topic, [(key.encode(), value, []) for key, value in records]
    )


def _item(answer_id: str, **changes: Any) -> tuple[str, bytes]:
    return answer_id, review_item(answer_id, **changes).model_dump_json().encode()


def _label(label_id: str, answer_id: str, **changes: Any) -> tuple[str, bytes]:
    return answer_id, label_bytes(label_id, answer_id=answer_id, **changes)


async def _within(
    outputs: _Outputs, running: RunningLoops, done: Callable[[], bool], what: str
) -> None:
    """Wait for ``done``, failing at once if a loop ends."""

    def checked() -> bool:
        running.check()
        return done()

    await outputs.until(checked, what)


@pytest.mark.timeout(150)
async def test_labels_before_and_after_their_item_count_once_across_a_restart(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await _create_topics(settings)
    queue, labels = settings.review.queue_topic, settings.review.labels_topic
    outputs = _Outputs(settings)
    await outputs.consumer.start()
    try:
        # A label before its item (a1: flagged, weight 1), one after (a2: a passed answer
        # sampled at 25 %, weight 4).
        await _send(settings, labels, _label("l1", "a1", answer_label="hallucinated"))
        await _send(settings, queue, _item("a1"), _item("a2", hallucinated=False, p=0.25))
        await _send(settings, labels, _label("l2", "a2", answer_label="faithful"))
        async with RunningLoops(_labels(settings), _accuracy(settings)) as running:
            await _within(
                outputs,
                running,
                lambda: (e := outputs.latest()) is not None and e.labels == 2,
                "both labels counted",
            )
        first = outputs.latest()
        assert first is not None
        assert (first.labelled_answers, first.tp.w, first.tn.w, first.fp.w) == (2, 1.0, 4.0, 0.0)
        assert first.sensitivity.estimate == 1.0 and first.specificity.estimate == 1.0
        assert first.cell.key == "acme/bot/Summary/rules"
        assert first.offline_sensitivity is not None  # the rules judge's benchmark figures
        assert sorted(a.label.label_id for a in outputs.audit) == ["l1", "l2"]
        assert [d.new_answer for d in outputs.deltas] == [True, True]

        # Restarted: l1 again (redelivered by its producer), then a second reviewer's
        # label of a1, whose item came before the restart. One partition (key a1), in
        # this order: had the duplicate counted, l3's event would say four labels.
        await _send(
            settings,
            labels,
            _label("l1", "a1", answer_label="hallucinated"),
            _label("l3", "a1", reviewer="bob", answer_label="hallucinated"),
        )
        async with RunningLoops(_labels(settings), _accuracy(settings)) as running:
            await _within(
                outputs,
                running,
                lambda: (e := outputs.latest()) is not None and e.labels >= 3,
                "the label after the restart",
            )
    finally:
        await outputs.consumer.stop()

    after = outputs.latest()
    assert after is not None
    # One answer more labelled? No: a1 was counted before the restart and still counts once.
    assert (after.labels, after.labelled_answers, after.kappa_pairs) == (3, 2, 1)
    assert (after.tp.w, after.tn.w) == pytest.approx((1.0, 4.0))
    assert sorted(a.label.label_id for a in outputs.audit) == ["l1", "l2", "l3"]
    assert len(outputs.deltas) == 3 and not outputs.dead
    (pair,) = [d.reviewer_pair for d in outputs.deltas if d.reviewer_pair is not None]
    assert pair == ("hallucinated", "hallucinated")


@pytest.mark.timeout(120)
async def test_unknown_answers_and_foreign_reviewers_become_dead_letters_whole(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await _create_topics(settings)
    queue, labels = settings.review.queue_topic, settings.review.labels_topic
    ghost = _label("l-ghost", "ghost")
    foreign = _label("l-eve", "a1", reviewer="eve")  # eve may see tenant "other" only
    renamed = _label("l-renamed", "a1", tenant="other")  # ann's label naming the wrong tenant
    broken = ("a1", b'{"label_id": "l-broken", ')
    await _send(settings, queue, _item("a1"))
    await _send(settings, labels, ghost, foreign, renamed, broken, _label("l-ok", "a1"))
    outputs = _Outputs(settings)
    await outputs.consumer.start()
    started = time.monotonic()
    try:
        async with RunningLoops(_labels(settings)) as running:
            await _within(
                outputs,
                running,
                lambda: any(d.reason is DeadLetterReason.UNKNOWN_ANSWER for d in outputs.dead),
                "the unknown answer's dead letter",
            )
        waited_s = time.monotonic() - started
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
        await admin.start()
        try:
            committed = await admin.list_consumer_group_offsets(f"{settings.app_id}.labels")
        finally:
            await admin.close()
    finally:
        await outputs.consumer.stop()

    by_reason: dict[DeadLetterReason, list[DeadLetter]] = {}
    for letter in outputs.dead:
        by_reason.setdefault(letter.reason, []).append(letter)
    assert sorted(by_reason) == sorted(
        [
            DeadLetterReason.BAD_JSON,
            DeadLetterReason.LABEL_REFUSED,
            DeadLetterReason.UNKNOWN_ANSWER,
        ]
    )
    (unknown,) = by_reason[DeadLetterReason.UNKNOWN_ANSWER]
    assert base64.b64decode(unknown.value_b64) == ghost[1]  # nothing lost
    assert unknown.topic == labels and base64.b64decode(unknown.key_b64 or "") == b"ghost"
    assert waited_s >= settings.labels.wait_for_outcome_s
    refused = {base64.b64decode(d.value_b64) for d in by_reason[DeadLetterReason.LABEL_REFUSED]}
    assert refused == {foreign[1], renamed[1]}
    (bad,) = by_reason[DeadLetterReason.BAD_JSON]
    assert base64.b64decode(bad.value_b64) == broken[1]
    assert [a.label.label_id for a in outputs.audit] == ["l-ok"]
    # Every input acknowledged, the expired label's included.
    ends = await _end_offsets(settings, [queue, labels])
    assert sum(ends.values()) == 6  # 1 item, 5 labels
    assert {tp: committed[tp].offset for tp, end in ends.items() if end} == {
        tp: end for tp, end in ends.items() if end
    }


async def _end_offsets(settings: Settings, topics: list[str]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers)
    await consumer.start()
    try:
        partitions = [
            TopicPartition(topic, partition)
            for topic in topics
            for partition in range(settings.topics.partitions)
        ]
        return dict(await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


@pytest.mark.timeout(120)
async def test_partition_n_of_the_queue_and_the_labels_go_to_one_member(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap, partitions=3)
    await _create_topics(settings)
    queue, labels = settings.review.queue_topic, settings.review.labels_topic
    answers = [f"a{i}" for i in range(8)]  # spread over the three partitions
    await _send(settings, queue, *[_item(a) for a in answers])
    await _send(settings, labels, *[_label(f"l-{a}", a) for a in answers])
    one, two = _labels(settings, instance="one"), _labels(settings, instance="two")
    outputs = _Outputs(settings)
    await outputs.consumer.start()
    try:
        async with RunningLoops(one, two) as running:

            def assignments() -> list[set[TopicPartition]]:
                return [
                    set(loop._consumer.assignment()) if loop.started else set()
                    for loop in (one, two)
                ]

            deadline = time.monotonic() + 40
            while not all(assignments()):
                running.check()
                assert time.monotonic() < deadline, f"not both assigned: {assignments()}"
                await asyncio.sleep(0.2)
            await _within(outputs, running, lambda: len(outputs.audit) == 8, "every label joined")
            owned = assignments()
    finally:
        await outputs.consumer.stop()

    for mine in owned:
        assert {tp.partition for tp in mine if tp.topic == queue} == {
            tp.partition for tp in mine if tp.topic == labels
        }
    # Three partitions, two members: a round-robin assignor would split partitions apart.
    assert sorted(tp.partition for mine in owned for tp in mine if tp.topic == labels) == [0, 1, 2]
    assert sorted(a.answer_id for a in outputs.audit) == answers and not outputs.dead
