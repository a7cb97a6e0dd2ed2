"""One record's headers must not stop a loop, on real Kafka.

The poison: a valid ``traceparent`` with a 1 MB ``baggage`` header, which the broker
accepts. Before trace context was bounded, the worker copied it onto every record
written for the answer, the transaction was refused and the worker exited - again on
every restart; on one Kafka gate request it took the whole gate down. Here the judging
loop, the Kafka gate and the labels loop each read the poison between good records:
each keeps running, every good record is answered after it, and the poison gets its
verdict with the oversized field dropped (not on any output record), counted and noted.

A record the broker refuses anyway (here: a verdicts topic whose ``max.message.bytes``
was lowered under the verdict's size) goes to the dead-letter topic with its bytes, and
the loop goes on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, DeadLetterReason, Verdict
from streamproc.contracts.gate_events import (
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    GateReply,
)
from streamproc.contracts.label_events import LabelAuditEntry
from streamproc.monitor.judging_loop import JudgeLoop
from streamproc.review.labels.loop import LabelsLoop
from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.wiring import (
    build_judge,
    gate_client,
    kafka_loop_options,
    prepare_topics,
    stage_limits,
)
from tests.integration import test_gate_kafka as gate_kafka
from tests.integration import test_labels_kafka as labels_kafka
from tests.integration.running import RunningLoops
from tests.unit.gate.conftest import event
from tests.unit.review.labels.test_join import may_label

TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01".encode()
BAGGAGE = b"k=" + b"v" * (1_047_800 - 2)
"""1,047,800 bytes: an answer carrying it stays under the broker's default
``message.max.bytes`` (1,048,588), so the broker takes it; a verdict carrying it would
not fit the verdicts topic's 1 MiB."""
POISON = [("traceparent", TRACEPARENT), ("baggage", BAGGAGE)]
WAIT_S = 60.0


async def _produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, list[tuple[str, bytes]]]]
) -> None:
    """Each record acknowledged before the next (one producer allowed large requests)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_request_size=4 * 1024 * 1024
    )
    await producer.start()
    try:
        for value, headers in records:
            await producer.send_and_wait(topic, value=value, headers=headers)
    finally:
        await producer.stop()


async def _read(
    settings: Settings,
    topics: list[str],
    done: Callable[[dict[str, list[tuple[bytes, dict[str, bytes]]]]], bool],
    alive: Callable[[], None],
) -> dict[str, list[tuple[bytes, dict[str, bytes]]]]:
    """read_committed (value, headers) per topic until ``done``; ``alive`` raises when a
    loop under test has ended."""
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=settings.bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        metadata_max_age_ms=1000,
    )
    seen: dict[str, list[tuple[bytes, dict[str, bytes]]]] = {topic: [] for topic in topics}
    await consumer.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not done(seen):
            alive()
            if time.monotonic() > deadline:
                pytest.fail(f"timed out: { {t: len(v) for t, v in seen.items()} }")
            for tp, records in (await consumer.getmany(timeout_ms=300)).items():
                for record in records:
                    headers = {k: v for k, v in record.headers or () if v is not None}
                    seen[tp.topic].append((record.value or b"", headers))
    finally:
        await consumer.stop()
    return seen


# --- the judging loop ---------------------------------------------------------------------


def _worker_settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"poison-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"poison-{run}.{name}" for name in names}, "partitions": 1},
        audit={"topic": f"poison-{run}.audit"},
        # The worker's labels and accuracy loops too read topics of this run only: on a
        # broker the whole suite shares, the default ones hold every other test's records.
        review={"queue_topic": f"poison-{run}.review", "labels_topic": f"poison-{run}.labels"},
        labels={
            "deltas_topic": f"poison-{run}.deltas",
            "accuracy_topic": f"poison-{run}.accuracy",
        },
        judge={"name": "rules"},
        worker={"batch_max": 50, "event_time_max_past_s": 10 * 365 * 24 * 3600.0},
    )


def _answer(event_id: str) -> bytes:
    return json.dumps(
        {
            "event_id": event_id,
            "answer_id": f"ans-{event_id}",
            "conversation_id": "c1",
            "tenant": "t1",
            "assistant_id": "bot",
            "model": "m1",
            "occurred_at": datetime.now(UTC).isoformat(),
            "question": "When does the store open?",
            "answer": "The store opens at 9 am.",
            "evidence": [{"id": "D1", "text": "The store opens at 9 am on weekdays."}],
        }
    ).encode()


def _verdicts(
    records: list[tuple[bytes, dict[str, bytes]]],
) -> dict[str, tuple[Verdict, dict[str, bytes]]]:
    parsed = [(Verdict.model_validate_json(value), headers) for value, headers in records]
    return {verdict.answer_id: (verdict, headers) for verdict, headers in parsed}


async def test_the_worker_judges_a_poison_header_answer_and_the_answers_after_it(
    kafka_bootstrap: str,
) -> None:
    settings = _worker_settings(kafka_bootstrap)
    await prepare_topics(settings)
    traced = [("traceparent", TRACEPARENT)]
    await _produce(
        kafka_bootstrap,
        settings.topics.answers,
        [(_answer("before"), traced), (_answer("poison"), POISON), (_answer("after"), traced)],
    )
    metrics = WorkerMetrics()
    loop = JudgeLoop(
        kafka_loop_options(settings),
        build_judge(settings.judge),
        metrics=metrics,
        limits=stage_limits(settings),
    )
    task = asyncio.create_task(loop.run())

    def alive() -> None:
        if task.done():
            raise AssertionError(f"the judging loop ended: {task.exception()!r}")

    verdicts_topic, audit_topic = settings.topics.verdicts, settings.audit.topic
    try:
        seen = await _read(
            settings,
            [verdicts_topic, audit_topic, settings.topics.outcomes],
            lambda s: len(s[verdicts_topic]) >= 3 and len(s[audit_topic]) >= 3,
            alive,
        )
        await _produce(kafka_bootstrap, settings.topics.answers, [(_answer("later"), POISON)])
        later = await _read(
            settings, [verdicts_topic], lambda s: len(s[verdicts_topic]) >= 4, alive
        )
        alive()
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)

    verdicts = _verdicts(later[verdicts_topic])
    assert set(verdicts) == {"ans-before", "ans-poison", "ans-after", "ans-later"}
    for answer_id in ("ans-poison", "ans-later"):
        verdict, headers = verdicts[answer_id]
        notes = [n for n in verdict.judgement.limits if n.startswith("TRACE_CONTEXT_DROPPED")]
        assert notes == ["TRACE_CONTEXT_DROPPED: baggage too_long (1047800 bytes, at most 8192)"]
        assert verdict.trace_id == TRACE_ID  # the valid traceparent is still followed
        assert headers == {"traceparent": TRACEPARENT}
    for answer_id in ("ans-before", "ans-after"):
        verdict, headers = verdicts[answer_id]
        assert not any(n.startswith("TRACE_CONTEXT") for n in verdict.judgement.limits)
        assert headers == {"traceparent": TRACEPARENT}
    # No record written for any answer carries the oversized field.
    for records in seen.values():
        assert all("baggage" not in headers for _, headers in records)
    dropped = metrics.registry.get_sample_value(
        "streamproc_trace_context_dropped_total", {"header": "baggage", "reason": "too_long"}
    )
    assert dropped == 2.0


async def test_a_record_the_broker_refuses_is_dead_lettered_and_the_worker_goes_on(
    kafka_bootstrap: str,
) -> None:
    """The verdicts topic's limit lowered by hand under a verdict's size: the broker
    refuses every verdict. Each becomes a dead letter with its bytes; the answers' other
    records (outcomes) are published, and later answers are judged too."""
    settings = _worker_settings(kafka_bootstrap)
    await prepare_topics(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    settings.topics.verdicts,
                    configs={"max.message.bytes": "600"},
                )
            ]
        )
    finally:
        await admin.close()
    await asyncio.sleep(1.0)  # the broker applies a topic's new config asynchronously
    await _produce(
        kafka_bootstrap, settings.topics.answers, [(_answer(f"r{i}"), []) for i in range(3)]
    )
    metrics = WorkerMetrics()
    loop = JudgeLoop(
        kafka_loop_options(settings),
        build_judge(settings.judge),
        metrics=metrics,
        limits=stage_limits(settings),
    )
    task = asyncio.create_task(loop.run())

    def alive() -> None:
        if task.done():
            raise AssertionError(f"the judging loop ended: {task.exception()!r}")

    dead_topic, outcomes_topic = settings.topics.dead_letter, settings.topics.outcomes
    try:
        seen = await _read(
            settings,
            [dead_topic, outcomes_topic, settings.topics.verdicts],
            lambda s: len(s[dead_topic]) >= 3 and len(s[outcomes_topic]) >= 3,
            alive,
        )
        await _produce(kafka_bootstrap, settings.topics.answers, [(_answer("r3"), [])])
        seen = await _read(
            settings, [dead_topic, outcomes_topic], lambda s: len(s[outcomes_topic]) >= 4, alive
        )
        alive()
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)

    letters = [DeadLetter.model_validate_json(value) for value, _ in seen[dead_topic]]
    assert len(letters) == 4
    answer_ids = set()
    for letter in letters:
        assert letter.reason == DeadLetterReason.OUTPUT_TOO_LARGE
        assert letter.topic == settings.topics.verdicts
        assert "refused by the broker" in letter.error
        assert "MessageSizeTooLargeError" in letter.error
        verdict = Verdict.model_validate_json(base64.b64decode(letter.value_b64))
        answer_ids.add(verdict.answer_id)
    assert answer_ids == {"ans-r0", "ans-r1", "ans-r2", "ans-r3"}
    assert len(seen[outcomes_topic]) == 4  # the innocent records of the same batches
    count = metrics.registry.get_sample_value(
        "streamproc_dead_letters_total", {"reason": "output_too_large"}
    )
    assert count is not None and count >= 4


# --- the Kafka gate -----------------------------------------------------------------------


async def test_the_kafka_gate_answers_a_poison_header_request_and_the_requests_after_it(
    kafka_bootstrap: str,
) -> None:
    # Authorisation and reply-topic rules are tested elsewhere; here, only the headers.
    settings = gate_kafka._settings(
        kafka_bootstrap, kafka_auth="none", reply_topic_pattern=r"gate\.replies\..+"
    )
    await prepare_topics(settings)
    reply_topic = f"gate.replies.{settings.app_id}"
    poison = event(gate_kafka.SUPPORTED, event_id=f"poison-{uuid.uuid4().hex[:6]}")
    correlation = f"poison-{uuid.uuid4().hex}".encode()
    async with (
        gate_kafka._gate(settings) as gate,
        gate_client(settings, reply_topic=reply_topic) as client,
    ):
        await gate_kafka._served(client, gate)
        await _produce(
            kafka_bootstrap,
            settings.gate.requests_topic,
            [
                (
                    gate_kafka._body(poison),
                    [
                        (REPLY_TOPIC_HEADER, reply_topic.encode()),
                        (CORRELATION_ID_HEADER, correlation),
                        (BUDGET_HEADER, str(int(gate_kafka.CHECK_BUDGET_MS)).encode()),
                        *POISON,
                    ],
                )
            ],
        )
        after = event(gate_kafka.SUPPORTED, event_id=f"after-{uuid.uuid4().hex[:6]}")
        decision = await client.check(gate_kafka._body(after), budget_ms=gate_kafka.CHECK_BUDGET_MS)
        gate.check_running()
        assert decision.reply is not None and not decision.by_policy, decision
        seen = await _read(
            settings,
            [reply_topic, settings.topics.verdicts],
            lambda s: (
                any(h.get(CORRELATION_ID_HEADER) == correlation for _, h in s[reply_topic])
                and poison["answer_id"] in _verdicts(s[settings.topics.verdicts])
            ),
            gate.check_running,
        )
        gate.check_running()

    [(value, headers)] = [
        r for r in seen[reply_topic] if r[1].get(CORRELATION_ID_HEADER) == correlation
    ]
    reply = GateReply.model_validate_json(value)
    note = "TRACE_CONTEXT_DROPPED: baggage too_long (1047800 bytes, at most 8192)"
    assert note in reply.verdict.judgement.limits
    assert "baggage" not in headers
    verdict, verdict_headers = _verdicts(seen[settings.topics.verdicts])[poison["answer_id"]]
    assert note in verdict.judgement.limits
    assert verdict.trace_id == TRACE_ID
    assert "baggage" not in verdict_headers
    assert all("baggage" not in h for _, h in seen[reply_topic])


# --- the labels loop ----------------------------------------------------------------------


async def test_the_labels_loop_joins_poison_header_items_and_labels_and_goes_on(
    kafka_bootstrap: str,
) -> None:
    settings = labels_kafka._settings(kafka_bootstrap, partitions=1)
    await labels_kafka._create_topics(settings)
    review = settings.review
    poison_item, poison_label = (
        labels_kafka._item("a-poison"),
        labels_kafka._label("l-poison", "a-poison"),
    )
    await _produce(kafka_bootstrap, review.queue_topic, [(poison_item[1], POISON)])
    await _produce(kafka_bootstrap, review.labels_topic, [(poison_label[1], POISON)])
    loop = LabelsLoop(kafka_loop_options(settings), settings.labels, may_label=may_label)
    outputs = labels_kafka._Outputs(settings)
    await outputs.consumer.start()
    try:
        async with RunningLoops(loop) as running:
            await labels_kafka._within(
                outputs, running, lambda: len(outputs.audit) >= 1, "the poison label"
            )
            await labels_kafka._send(settings, review.queue_topic, labels_kafka._item("a-after"))
            await labels_kafka._send(
                settings, review.labels_topic, labels_kafka._label("l-after", "a-after")
            )
            await labels_kafka._within(
                outputs, running, lambda: len(outputs.audit) >= 2, "the label after it"
            )
            running.check()
    finally:
        await outputs.consumer.stop()
    assert sorted(entry.answer_id for entry in outputs.audit) == ["a-after", "a-poison"]
    assert all(isinstance(entry, LabelAuditEntry) for entry in outputs.audit)
    assert outputs.dead == []
    assert loop.accepted == 2


# --- the worker process, as deployed ----------------------------------------------------


async def test_the_worker_process_stays_up_through_poison_headers(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``python -m streamproc worker``: before the bounds, this answer made it exit (code
    3) in under a second, and again after every restart."""
    settings = _worker_settings(kafka_bootstrap)
    await prepare_topics(settings)
    answers = [(_answer("p0"), POISON), (_answer("p1"), [("traceparent", TRACEPARENT)])]
    await _produce(kafka_bootstrap, settings.topics.answers, answers)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()

    def alive() -> None:
        if not worker.running:
            log = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"the worker exited ({worker.wait(0)}): {log}")

    verdicts_topic = settings.topics.verdicts
    try:
        seen = await _read(settings, [verdicts_topic], lambda s: len(s[verdicts_topic]) >= 2, alive)
        await _produce(kafka_bootstrap, settings.topics.answers, [(_answer("p2"), POISON)])
        seen = await _read(settings, [verdicts_topic], lambda s: len(s[verdicts_topic]) >= 3, alive)
        await asyncio.sleep(1.0)
        alive()
    finally:
        code = worker.stop()
    assert code == 0
    verdicts = _verdicts(seen[verdicts_topic])
    assert set(verdicts) == {"ans-p0", "ans-p1", "ans-p2"}
    assert all("baggage" not in headers for _, headers in verdicts.values())
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert log.count("trace_context_dropped") == 2
