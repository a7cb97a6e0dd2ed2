"""Faults the consumer loops must survive or stop on cleanly, on a real broker.

- A record batch the client cannot decode (here: lz4 with the codec switched off, which
  is what a missing codec library looked like in the field) is dead-lettered record by
  record (``unreadable_record``) and consumption goes on.
- A batch whose outputs the broker will not take (its output topic deleted) is never
  acknowledged: the worker logs one line and exits with code 3, and the worker that
  replaces it judges those answers.
- A window whose aggregate cannot be published is not marked closed: the next worker
  closes it with every answer.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiokafka.codec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamproc.cli.child_process import WorkerProcess
from streamproc.cli.worker import EXIT_PUBLISH_FAILED
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.kafka.clients import publish_answers
from streamproc.monitor.judging_loop import JudgeLoop, judge_group_id
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import build_judge, kafka_loop_options, prepare_topics, stage_limits


def _settings(bootstrap: str, prefix: str, **worker: object) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"{prefix}-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"{prefix}-{run}.{name}" for name in names}, "partitions": 2},
        judge={"name": "rules"},
        worker={"session_timeout_s": 6.0, "rebalance_timeout_s": 10.0, **worker},
    )


def _fresh(answers: list[AnswerEvent], tag: str) -> list[AnswerEvent]:
    now = datetime.now(UTC)
    return [
        a.model_copy(update={"event_id": f"{tag}-{i}", "occurred_at": now - timedelta(seconds=i)})
        for i, a in enumerate(answers)
    ]


async def _read_committed(
    settings: Settings, done: Callable[[dict[str, list[dict[str, object]]]], bool], timeout_s: float
) -> dict[str, list[dict[str, object]]]:
    kinds = {settings.topics.verdicts: "verdict", settings.topics.dead_letter: "dead_letter"}
    consumer = AIOKafkaConsumer(
        *kinds,
        bootstrap_servers=settings.bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    seen: dict[str, list[dict[str, object]]] = {"verdict": [], "dead_letter": []}
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done(seen):
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                seen[kinds[tp.topic]] += [json.loads(r.value or b"{}") for r in records]
    finally:
        await consumer.stop()
    return seen


async def test_an_unreadable_batch_is_dead_lettered_and_the_rest_is_judged(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(kafka_bootstrap, "codec")
    await prepare_topics(settings)
    seeds = load_answers(SEED_LAB)
    unreadable, readable = _fresh(seeds[:3], "lz4"), _fresh(seeds[3:7], "gzip")
    # Partition 0: two readable records, the lz4 batch (offsets 2-4), two readable again.
    for codec, batch in (("gzip", readable[:2]), ("lz4", unreadable), ("gzip", readable[2:])):
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap, compression_type=codec, linger_ms=200
        )
        await producer.start()
        try:
            sent = [
                await producer.send(
                    settings.topics.answers, a.model_dump_json().encode(), partition=0
                )
                for a in batch
            ]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
    monkeypatch.setattr(aiokafka.codec, "has_lz4", lambda: False)  # the library is "gone"

    loop = JudgeLoop(
        kafka_loop_options(settings), build_judge(settings.judge), limits=stage_limits(settings)
    )
    task = asyncio.create_task(loop.run())
    try:
        seen = await _read_committed(
            settings,
            lambda s: len(s["verdict"]) >= 4 and len(s["dead_letter"]) >= 3,
            timeout_s=60,
        )
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)

    judged = sorted(str(v["event_id"]) for v in seen["verdict"])
    assert judged == sorted(a.event_id for a in readable)
    letters = seen["dead_letter"]
    assert [d["reason"] for d in letters] == ["unreadable_record"] * 3
    assert sorted(int(str(d["offset"])) for d in letters) == [2, 3, 4]
    assert all("lz4" in str(d["error"]) for d in letters)
    assert loop.unreadable == 3


async def test_output_topics_are_created_with_their_size_limit_and_retention(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap, "limits")
    await prepare_topics(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        names = [settings.topics.verdicts, settings.topics.dead_letter]
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        )
    finally:
        await admin.close()
    configs: dict[str, dict[str, str]] = {}
    for response in responses:
        for _, _, _, name, entries in response.resources:
            configs[name] = {entry[0]: entry[1] for entry in entries}
    verdicts, letters = configs[names[0]], configs[names[1]]
    assert verdicts["max.message.bytes"] == str(settings.topics.output_max_message_bytes)
    assert letters["retention.ms"] == str(settings.topics.dead_letter_retention_ms)


async def test_a_batch_the_broker_will_not_take_is_never_acknowledged(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap, "nopub", publish_timeout_s=5.0, instance_id="only")
    await prepare_topics(settings)
    seeds = load_answers(SEED_LAB)
    first, second = _fresh(seeds[:6], "first"), _fresh(seeds[6:], "second")
    worker = WorkerProcess(settings, tmp_path / "worker-1.log").start()
    try:
        await publish_answers(settings.bootstrap_servers, settings.topics.answers, first)
        seen = await _read_committed(settings, lambda s: len(s["verdict"]) >= 6, timeout_s=90)
        assert len(seen["verdict"]) == 6, worker.log_tail()

        await _delete_topic(kafka_bootstrap, settings.topics.verdicts)
        await publish_answers(settings.bootstrap_servers, settings.topics.answers, second)
        code = await asyncio.to_thread(worker.wait, 90.0)
        assert code == EXIT_PUBLISH_FAILED, worker.log_tail()
        assert "publish_failed_exiting" in worker.log_tail(5)
    finally:
        worker.kill()

    committed = await _committed_total(settings)
    assert committed == len(first), "the unpublished batch must not be acknowledged"

    await asyncio.sleep(2)  # let the deletion settle before the topic is made again
    await prepare_topics(settings)
    with WorkerProcess(settings, tmp_path / "worker-2.log"):
        seen = await _read_committed(settings, lambda s: len(s["verdict"]) >= 6, timeout_s=120)
    assert sorted(str(v["event_id"]) for v in seen["verdict"]) == sorted(a.event_id for a in second)


async def _committed_total(settings: Settings) -> int:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=judge_group_id(settings.app_id),
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        total = 0
        for partition in range(settings.topics.partitions):
            total += (
                await consumer.committed(TopicPartition(settings.topics.answers, partition)) or 0
            )
        return total
    finally:
        await consumer.stop()


async def test_a_window_is_closed_only_once_its_aggregate_is_published(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The aggregates topic is gone when the window is due: the worker exits 3 and the
    window stays open in the committed state; the next worker closes it with every answer."""
    settings = _settings(kafka_bootstrap, "noagg", publish_timeout_s=5.0, instance_id="only")
    settings = settings.model_copy(
        update={
            "window": settings.window.model_copy(
                update={"grace_s": 1.0, "idle_close_s": 2.0, "tick_s": 0.5}
            )
        }
    )
    await prepare_topics(settings)
    past = datetime.now(UTC) - timedelta(minutes=5)  # its window is due after idle_close_s
    answers = [
        a.model_copy(update={"event_id": f"w-{i}", "occurred_at": past})
        for i, a in enumerate(load_answers(SEED_LAB)[:6])
    ]
    worker = WorkerProcess(settings, tmp_path / "worker-1.log").start()
    try:
        # Once it runs (a starting worker would create the topic again), the topic goes.
        await _until_logged(worker, "windows_loop_started", timeout_s=90)
        await _delete_topic(kafka_bootstrap, settings.topics.aggregates)
        await publish_answers(settings.bootstrap_servers, settings.topics.answers, answers)
        code = await asyncio.to_thread(worker.wait, 120.0)
        assert code == EXIT_PUBLISH_FAILED, worker.log_tail()
        assert "publish_failed_exiting" in worker.log_tail(5)
    finally:
        worker.kill()

    await asyncio.sleep(2)
    await prepare_topics(settings)
    with WorkerProcess(settings, tmp_path / "worker-2.log") as replacement:
        windows = await _latest_windows(settings, answers=len(answers), timeout_s=120)
        assert sum(windows.values()) == len(answers), replacement.log_tail()


async def _until_logged(worker: WorkerProcess, event: str, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.log_path.exists() and event in worker.log_path.read_text(errors="replace"):
            return
        await asyncio.sleep(0.5)
    pytest.fail(f"worker never logged {event}:\n{worker.log_tail()}", pytrace=False)


async def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


async def _latest_windows(
    settings: Settings, *, answers: int, timeout_s: float
) -> dict[tuple[str, str], int]:
    """Answers per window, latest revision, read_committed, once they add up (or time out)."""
    consumer = AIOKafkaConsumer(
        settings.topics.aggregates,
        bootstrap_servers=settings.bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    latest: dict[tuple[str, str], tuple[int, int]] = {}
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    doc = json.loads(record.value or b"{}")
                    key = (str(doc["assistant_id"]), str(doc["window_start"]))
                    if doc["revision"] >= latest.get(key, (-1, 0))[0]:
                        latest[key] = (int(doc["revision"]), int(doc["answers"]))
            if sum(n for _, n in latest.values()) >= answers:
                break
    finally:
        await consumer.stop()
    return {key: n for key, (_, n) in latest.items()}
