"""Burn-rate alerts on real Kafka, from a replayed stream through a worker process.

One assistant of tenant t1 runs at 2 % hallucinated for 20 minutes of event time, spikes
to 30 % for 10 minutes, then returns to 2 %: exactly one page fires, within the short
window after the spike starts, and exactly one resolves after it ends. Tenant t2 has an
assistant with the same id at 2 % throughout (no alert: a tenant never moves another's
numbers), and tenant t3's quiet assistant has 3 hallucinated of 4 answers in an hour (no
alert: the minimum sample).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.wiring import prepare_topics

PER_MINUTE = 40
# 12.5 % over 10 min and 5 min: the workbook's 14.4x over 1 h would need a 72 % rate at a
# 5 % objective (docs/on-call.md, "Hallucination alerts").
PAGE = [{"long_s": 600, "short_s": 300, "factor": 2.5}]


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"alerts-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"alerts-{run}.{name}" for name in names}, "partitions": 3},
        audit={"enabled": False},
        judge={"name": "rules"},
        window={
            "size_s": 60.0,
            "hopping": [],
            "grace_s": 1.0,
            "idle_close_s": 2.0,
            "tick_s": 0.5,
            "late_topic": f"alerts-{run}.late",
        },
        alerts={"page": PAGE, "ticket": [], "topic": f"alerts-{run}.alerts"},
        worker={"event_time_max_past_s": 30 * 24 * 3600.0},
    )


def _answer(index: int, tenant: str, assistant: str, at: datetime, bad: bool) -> bytes:
    return json.dumps(
        {
            "event_id": f"{tenant}-{index}",
            "answer_id": f"{tenant}-a{index}",
            "conversation_id": f"c{index % 7}",
            "tenant": tenant,
            "assistant_id": assistant,
            "model": "m1",
            "occurred_at": at.isoformat(),
            "question": "When does the store open?",
            "answer": "The store opens at 7 am." if bad else "The store opens at 9 am.",
            "evidence": [{"id": "D1", "text": "The store opens at 9 am on weekdays."}],
        }
    ).encode()


def _stream(base: datetime) -> list[bytes]:
    """Every answer in event-time order."""
    out: list[bytes] = []
    for minute in range(50):
        spiking = 20 <= minute < 30
        for i in range(PER_MINUTE):
            at = base + timedelta(minutes=minute, seconds=i * 60 / PER_MINUTE)
            index = minute * PER_MINUTE + i
            bad = (i % 10 < 3) if spiking else (index % 50 == 0)
            out.append(_answer(index, "t1", "bot", at, bad))
            out.append(_answer(index, "t2", "bot", at, index % 50 == 0))
        if minute in (0, 15, 30, 45):  # the quiet assistant: 3 of 4 hallucinated
            out.append(
                _answer(minute, "t3", "quiet", base + timedelta(minutes=minute), minute < 45)
            )
    return out


async def test_a_spike_pages_once_and_resolves_once_and_small_samples_stay_quiet(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    base = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=20)
    await producer.start()
    try:
        sent = [await producer.send(settings.topics.answers, value) for value in _stream(base)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()

    events: list[dict[str, object]] = []
    consumer = AIOKafkaConsumer(
        settings.alerts.topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    with WorkerProcess(settings, tmp_path / "worker.log") as worker:
        await consumer.start()
        try:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and not any(e["state"] == "resolved" for e in events):
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    events += [json.loads(r.value or b"{}") for r in records]
            settle = time.monotonic() + 5  # a re-fire or a second resolve would show now
            while time.monotonic() < settle:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    events += [json.loads(r.value or b"{}") for r in records]
        finally:
            await consumer.stop()
        log = worker.log_tail(30)

    summary = [(e["state"], e["severity"], e["tenant"], e["assistant_id"]) for e in events]
    assert summary == [
        ("firing", "page", "t1", "bot"),
        ("resolved", "page", "t1", "bot"),
    ], f"{summary}\n{log}"
    firing, resolved = events
    assert firing["alert_id"] == resolved["alert_id"]
    spike_start = base + timedelta(minutes=20)
    fired_at = datetime.fromisoformat(str(firing["event_time"]))
    assert spike_start < fired_at <= spike_start + timedelta(minutes=5)  # the short window
    assert datetime.fromisoformat(str(resolved["event_time"])) > base + timedelta(minutes=30)
    examples = firing["example_answer_ids"]
    assert (
        isinstance(examples, list) and examples and all(str(a).startswith("t1-") for a in examples)
    )
