"""A healthy start logs no error, on real Kafka.

While a worker creates its topics and joins its groups on a fresh broker, the broker
answers NotLeaderForPartition and GroupCoordinatorNotAvailable for a moment; aiokafka
logs those at ERROR and retries. They are expected there, so a healthy start must not
page anyone: ``python -m streamproc worker`` on topics of its own (a fresh broker, as far
as it can tell) judges one answer, stops, and no line of its JSON log is at error level.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings

WAIT_S = 90.0


def _fresh_settings(bootstrap: str) -> Settings:
    """Every topic the worker reads or writes is new to the broker (the labels and
    accuracy loops' too: the default ones hold every other test's records)."""
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"quiet-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"quiet-{run}.{name}" for name in names}, "partitions": 2},
        audit={"topic": f"quiet-{run}.audit", "checkpoint_topic": f"quiet-{run}.audit-ckpt"},
        review={"queue_topic": f"quiet-{run}.review", "labels_topic": f"quiet-{run}.labels"},
        labels={"deltas_topic": f"quiet-{run}.deltas", "accuracy_topic": f"quiet-{run}.accuracy"},
        judge={"name": "rules"},
    )


def _answer() -> bytes:
    return json.dumps(
        {
            "event_id": "q1",
            "answer_id": "ans-q1",
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


async def _wait_for_topic(bootstrap: str, topic: str, worker: WorkerProcess) -> None:
    """Until the worker has created ``topic`` (so the answer does not auto-create it)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while topic not in set(await admin.list_topics()):
            assert worker.running, f"the worker exited: {worker.log_tail()}"
            assert time.monotonic() < deadline, "the worker created no topics"
            await asyncio.sleep(0.5)
    finally:
        await admin.close()


async def _one_verdict(bootstrap: str, topic: str, worker: WorkerProcess) -> None:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        metadata_max_age_ms=1000,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not any((await consumer.getmany(timeout_ms=500)).values()):
            assert worker.running, f"the worker exited: {worker.log_tail()}"
            assert time.monotonic() < deadline, f"no verdict: {worker.log_tail()}"
    finally:
        await consumer.stop()


async def test_a_healthy_start_on_fresh_topics_logs_no_error(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _fresh_settings(kafka_bootstrap)
    log_path = tmp_path / "worker.log"
    worker = WorkerProcess(settings, log_path).start()
    try:
        await _wait_for_topic(kafka_bootstrap, settings.topics.answers, worker)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(settings.topics.answers, _answer())
        finally:
            await producer.stop()
        await _one_verdict(kafka_bootstrap, settings.topics.verdicts, worker)
    finally:
        code = worker.stop()
    assert code == 0, worker.log_tail()
    lines = log_path.read_text(errors="replace").splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any(record["event"] == "worker_stopped" for record in records)
    errors = [record for record in records if record["level"] in ("error", "critical")]
    assert errors == []
