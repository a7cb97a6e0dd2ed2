"""Nothing one tenant sends takes another's place, on real Kafka:

- two tenants send answers with one answer id (the other tenant's first): each gets its
  verdict, its review item in the review page's queue and its label joined to its own
  item;
- one tenant's event id sent three times, across a worker restart, is judged once (the
  marks are restored from their changelog), while another tenant's event of that id is
  judged;
- a Kafka gate request naming the verdicts or the audit topic as its reply topic writes
  nothing there;
- a Kafka gate request without a valid token, or with another tenant's, is refused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, DeadLetter, DeadLetterReason, Verdict
from streamproc.contracts.gate_events import (
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    GateError,
    GateReply,
)
from streamproc.contracts.label_events import LabelAuditEntry, ReviewItem
from streamproc.gate.http.auth import caller_stanza
from streamproc.gate.sensor import NullGateSensor
from streamproc.kafka.clients import publish_answers, publish_raw
from streamproc.kafka.topics import TopicSpec, ensure_topics
from streamproc.monitor.judging_loop import JudgeLoop, judge_group_id
from streamproc.review.labels.loop import LabelsLoop
from streamproc.review.page.auth import Reviewer
from streamproc.review.page.intake import ReviewIntake
from streamproc.review.page.queue_store import ReviewQueueStore
from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import (
    build_gate,
    build_judge,
    gate_request_loop,
    kafka_connection,
    kafka_loop_options,
    prepare_topics,
    stage_limits,
    topic_names,
)
from tests.integration.run_settings import run_settings
from tests.integration.running import RunningLoops
from tests.unit.gate.conftest import event
from tests.unit.review.labels.test_join import label_bytes, may_label

ANSWER = "Incomplete orders cannot be delivered or billed [D1]."
WAIT_S = 60.0
ACME_TOKEN = "acme-caller-token-for-tests"
OTHER_TOKEN = "other-caller-token-for-tests"


def _settings(bootstrap: str, prefix: str, **fields: Any) -> Settings:
    settings = run_settings(
        bootstrap,
        prefix,
        partitions=2,
        judge={"name": "rules"},
        worker={
            "batch_max": 8,
            "session_timeout_s": 6.0,
            "rebalance_timeout_s": 10.0,
            "judge_process": False,
        },
        **fields,
    )
    run = settings.app_id
    return settings.model_copy(
        update={
            "audit": settings.audit.model_copy(update={"topic": f"{run}.audit"}),
            "alerts": settings.alerts.model_copy(update={"topic": f"{run}.alerts"}),
            "window": settings.window.model_copy(
                update={"hopping_topic": f"{run}.hopping", "late_topic": f"{run}.late"}
            ),
        }
    )


def _slot(settings: Settings, instance: str) -> Settings:
    worker = settings.worker.model_copy(update={"instance_id": instance})
    return settings.model_copy(update={"worker": worker})


def _answer(tenant: str, event_id: str, answer_id: str, conversation: str = "c1") -> AnswerEvent:
    fields = event(ANSWER, event_id=event_id, tenant=tenant)
    return AnswerEvent.model_validate(
        {**fields, "answer_id": answer_id, "conversation_id": conversation}
    )


class _Reader:
    """A read_committed reader of some topics from their start, values kept per topic."""

    def __init__(self, settings: Settings, *topics: str) -> None:
        self.consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            metadata_max_age_ms=1000,
        )
        self.seen: dict[str, list[tuple[bytes | None, dict[str, bytes], bytes]]] = {
            t: [] for t in topics
        }

    async def __aenter__(self) -> _Reader:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def until(
        self, done: Callable[[], bool], what: str, *, check: Callable[[], None] = lambda: None
    ) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            check()
            for tp, records in (await self.consumer.getmany(timeout_ms=300)).items():
                for record in records:
                    headers = {k: v for k, v in record.headers or () if v is not None}
                    self.seen[tp.topic].append((record.key, headers, record.value or b""))
            if done():
                return
        pytest.fail(f"timed out waiting for {what}: {self.seen}", pytrace=False)

    async def settle(self, seconds: float) -> None:
        """Read on for ``seconds``: a record that should not come would show."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await self.until(lambda: True, "nothing")

    def values(self, topic: str) -> list[bytes]:
        return [value for _, _, value in self.seen[topic]]


def _verdicts(reader: _Reader, settings: Settings) -> list[Verdict]:
    return [Verdict.model_validate_json(v) for v in reader.values(settings.topics.verdicts)]


# ------------------------------------------------------------------ colliding answer ids


@pytest.mark.timeout(240)
async def test_two_tenants_sharing_an_answer_id_each_get_their_review_item_and_label_join(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(
        kafka_bootstrap, "tenant-ids", review={"enabled": True, "sample_rate": 1.0}
    )
    await prepare_topics(settings)
    shared = "answer-7"
    # "other" sends acme's answer id first; acme's real answer comes after it.
    await publish_answers(
        settings.bootstrap_servers,
        settings.topics.answers,
        [_answer("other", "o-1", shared), _answer("acme", "a-1", shared)],
    )
    queue = settings.review.queue_topic
    async with (
        _Reader(settings, settings.topics.verdicts, queue, settings.audit.topic) as reader,
        RunningLoops(
            JudgeLoop(
                kafka_loop_options(settings),
                build_judge(settings.judge),
                limits=stage_limits(settings),
            )
        ) as running,
    ):
        await reader.until(
            lambda: len(reader.values(queue)) == 2, "two review items", check=running.check
        )
    items = [ReviewItem.model_validate_json(v) for v in reader.values(queue)]
    assert sorted((i.tenant, i.answer_id) for i in items) == [("acme", shared), ("other", shared)]
    assert sorted(v.tenant for v in _verdicts(reader, settings)) == ["acme", "other"]

    # The review page's queue keeps both items, each for its own tenant's reviewers.
    store = ReviewQueueStore(f"sqlite:///{tmp_path / 'review.db'}")
    queue_intake = ReviewIntake(
        store, kafka_connection(settings), topic_names(settings), poll_timeout_s=0.2
    )
    intake = asyncio.create_task(queue_intake.run())
    acme_reviewer = Reviewer("ann", frozenset({"acme"}), "0" * 64)
    other_reviewer = Reviewer("eve", frozenset({"other"}), "0" * 64)
    both = Reviewer("root", frozenset({"acme", "other"}), "0" * 64)
    try:
        deadline = time.monotonic() + WAIT_S
        while await asyncio.to_thread(store.waiting, both) < 2:
            assert time.monotonic() < deadline, "the intake did not queue both items"
            await asyncio.sleep(0.2)
    finally:
        intake.cancel()
        await asyncio.gather(intake, return_exceptions=True)
    acme_item = store.item_for(acme_reviewer, shared)
    other_item = store.item_for(other_reviewer, shared)
    assert acme_item is not None and acme_item.tenant == "acme"
    assert other_item is not None and other_item.tenant == "other"
    store.close()

    # Each tenant's reviewer labels its own answer: both labels join their own item.
    labels = settings.review.labels_topic
    await publish_raw(
        settings.bootstrap_servers,
        labels,
        [
            (
                shared.encode(),
                label_bytes("l-other", answer_id=shared, reviewer="eve", tenant="other"),
                [],
            ),
            (
                shared.encode(),
                label_bytes("l-acme", answer_id=shared, reviewer="ann", tenant="acme"),
                [],
            ),
        ],
    )
    async with (
        _Reader(settings, settings.audit.topic, settings.topics.dead_letter) as audit,
        RunningLoops(
            LabelsLoop(kafka_loop_options(settings), settings.labels, may_label=may_label)
        ) as running,
    ):

        def joined() -> list[LabelAuditEntry]:
            return [
                LabelAuditEntry.model_validate_json(value)
                for key, _, value in audit.seen[settings.audit.topic]
                if (key or b"").startswith(b"label:")
            ]

        await audit.until(lambda: len(joined()) == 2, "two joined labels", check=running.check)
        await audit.settle(2.0)
    entries = {entry.label.label_id: entry for entry in joined()}
    assert {(e.tenant, e.answer_id) for e in entries.values()} == {
        ("acme", shared),
        ("other", shared),
    }
    assert entries["l-acme"].tenant == "acme" and entries["l-other"].tenant == "other"
    assert audit.values(settings.topics.dead_letter) == []


# ------------------------------------------------------------------ repeated event ids


async def _committed(settings: Settings) -> int:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers, group_id=judge_group_id(settings.app_id)
    )
    await consumer.start()
    try:
        parts = [TopicPartition(settings.topics.answers, p) for p in range(2)]
        return sum([await consumer.committed(tp) or 0 for tp in parts])
    finally:
        await consumer.stop()


@pytest.mark.timeout(240)
async def test_an_event_id_sent_three_times_is_judged_once_across_a_worker_restart(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap, "tenant-dedup")
    await prepare_topics(settings)
    answers = settings.topics.answers
    first = _answer("acme", "e-1", "a-1")
    metrics = WorkerMetrics()
    async with _Reader(settings, settings.topics.verdicts) as reader:
        await publish_answers(settings.bootstrap_servers, answers, [first])
        async with RunningLoops(
            JudgeLoop(
                kafka_loop_options(_slot(settings, "w1")),
                build_judge(settings.judge),
                limits=stage_limits(settings),
            )
        ) as run:
            await reader.until(
                lambda: len(_verdicts(reader, settings)) == 1, "a verdict", check=run.check
            )
            # The second copy, in a batch of its own, with another tenant's event of the id.
            await publish_answers(
                settings.bootstrap_servers, answers, [first, _answer("other", "e-1", "o-1")]
            )
            await reader.until(
                lambda: len(_verdicts(reader, settings)) == 2, "other's verdict", check=run.check
            )
        # A new worker restores the marks from their changelog: the third copy too is
        # acknowledged, not judged.
        await publish_answers(settings.bootstrap_servers, answers, [first])
        async with RunningLoops(
            JudgeLoop(
                kafka_loop_options(_slot(settings, "w2")),
                build_judge(settings.judge),
                metrics=metrics,
                limits=stage_limits(settings),
            )
        ) as run:
            deadline = time.monotonic() + WAIT_S
            while await _committed(settings) < 4:
                run.check()
                assert time.monotonic() < deadline, "the third copy was not acknowledged"
                await asyncio.sleep(0.3)
            await reader.settle(2.0)
    judged = sorted((v.tenant, v.event_id) for v in _verdicts(reader, settings))
    assert judged == [("acme", "e-1"), ("other", "e-1")]
    assert metrics.registry.get_sample_value("streamproc_duplicate_events_total") == 1.0


# ------------------------------------------------------------------ the Kafka gate


@asynccontextmanager
async def _gate(settings: Settings) -> AsyncIterator[RunningLoops]:
    service = build_gate(settings, telemetry=Telemetry.disabled(), sensor=NullGateSensor())
    await service.start()
    try:
        async with RunningLoops(gate_request_loop(settings, service)) as running:
            yield running
    finally:
        await service.close()


def _gate_settings(bootstrap: str, tmp_path: Path) -> Settings:
    tokens = tmp_path / "callers.toml"
    tokens.write_text(
        caller_stanza("acme-bot", ["acme"], ACME_TOKEN)
        + "\n"
        + caller_stanza("other-bot", ["other"], OTHER_TOKEN)
    )
    return _settings(bootstrap, "tenant-gate", gate={"tokens_file": str(tokens)})


async def _ask(
    settings: Settings, reply_topic: str, correlation: str, *, token: str | None, tenant: str
) -> None:
    headers = [
        (REPLY_TOPIC_HEADER, reply_topic.encode()),
        (CORRELATION_ID_HEADER, correlation.encode()),
        (BUDGET_HEADER, b"20000"),
    ]
    if token is not None:
        headers.append(("authorization", f"Bearer {token}".encode()))
    body = json.dumps(event(ANSWER, event_id=correlation, tenant=tenant)).encode()
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.gate.requests_topic, body, key=correlation.encode(), headers=headers
        )
    finally:
        await producer.stop()


async def _ends(settings: Settings, *topics: str) -> dict[str, int]:
    """Every topic's high watermark summed over its partitions: 0 means nothing was ever
    written, not even an aborted transaction's records."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=None)
    await consumer.start()
    try:
        ends = {}
        for topic in topics:
            parts = [TopicPartition(topic, p) for p in range(settings.topics.partitions)]
            ends[topic] = sum((await consumer.end_offsets(parts)).values())
        return ends
    finally:
        await consumer.stop()


def _dead(reader: _Reader, settings: Settings) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for v in reader.values(settings.topics.dead_letter)]


@pytest.mark.timeout(180)
async def test_a_gate_request_naming_the_verdicts_or_audit_topic_writes_nothing_there(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _gate_settings(kafka_bootstrap, tmp_path)
    await prepare_topics(settings)
    replies = f"gate.replies.{settings.app_id}"
    await ensure_topics(settings.bootstrap_servers, [TopicSpec(replies, 1, 1)], settings.security)
    verdicts, audit = settings.topics.verdicts, settings.audit.topic
    async with (
        _Reader(settings, settings.topics.dead_letter, replies) as reader,
        _gate(settings) as running,
    ):
        for target in (verdicts, audit, settings.review.queue_topic):
            await _ask(settings, target, f"abuse-{target}", token=ACME_TOKEN, tenant="acme")
        await reader.until(
            lambda: len(_dead(reader, settings)) == 3, "three refusals", check=running.check
        )
        # Written to neither topic, not even in an aborted transaction.
        assert await _ends(settings, verdicts, audit, settings.review.queue_topic) == {
            verdicts: 0,
            audit: 0,
            settings.review.queue_topic: 0,
        }
        # The gate goes on: a request with an allowed reply topic is answered.
        await _ask(settings, replies, "fine", token=ACME_TOKEN, tenant="acme")
        await reader.until(lambda: len(reader.values(replies)) == 1, "a reply", check=running.check)
    assert {d.reason for d in _dead(reader, settings)} == {DeadLetterReason.REPLY_TOPIC_REFUSED}
    reply = GateReply.model_validate_json(reader.values(replies)[0])
    assert reply.verdict.tenant == "acme"


@pytest.mark.timeout(180)
async def test_a_gate_request_without_a_valid_token_for_its_tenant_is_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _gate_settings(kafka_bootstrap, tmp_path)
    await prepare_topics(settings)
    replies = f"gate.replies.{settings.app_id}"
    await ensure_topics(settings.bootstrap_servers, [TopicSpec(replies, 1, 1)], settings.security)
    async with (
        _Reader(settings, settings.topics.dead_letter, replies, settings.topics.verdicts) as reader,
        _gate(settings) as running,
    ):
        await _ask(settings, replies, "no-token", token=None, tenant="acme")
        await _ask(settings, replies, "bad-token", token="guessed", tenant="acme")
        await _ask(settings, replies, "other-tenant", token=OTHER_TOKEN, tenant="acme")
        await _ask(settings, replies, "allowed", token=OTHER_TOKEN, tenant="other")
        await reader.until(
            lambda: len(reader.values(replies)) == 4, "four replies", check=running.check
        )
        await reader.settle(1.0)
    by_id = {key.decode(): value for key, _, value in reader.seen[replies] if key is not None}
    errors = {
        cid: GateError.model_validate_json(by_id[cid]).error for cid in by_id if cid != "allowed"
    }
    assert errors == {
        "no-token": "unauthorized",
        "bad-token": "unauthorized",
        "other-tenant": "forbidden",
    }
    assert GateReply.model_validate_json(by_id["allowed"]).verdict.tenant == "other"
    assert [v.tenant for v in _verdicts(reader, settings)] == ["other"]
    dead = _dead(reader, settings)
    assert len(dead) == 3 and {d.reason for d in dead} == {DeadLetterReason.UNAUTHORIZED}
