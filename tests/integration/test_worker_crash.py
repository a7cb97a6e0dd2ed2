"""A worker killed mid-stream (SIGKILL: no commit, no goodbye) loses nothing: its
replacement re-judges what was not committed, and the window counts every answer once."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, Verdict, WindowAggregate
from streamproc.kafka.clients import OutputTail, publish_answers
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import build_judge, prepare_topics

WINDOW_START = datetime(2026, 2, 2, 10, 0, tzinfo=UTC)
REPLAY_HORIZON_S = 10 * 365 * 24 * 3600.0


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"crash-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"crash-{run}.{name}" for name in names}, "partitions": 3},
        window={"size_s": 60.0, "grace_s": 1.0, "idle_close_s": 3.0, "tick_s": 0.5},
        worker={
            "rebalance_timeout_s": 10.0,
            "session_timeout_s": 6.0,
            "event_time_max_past_s": REPLAY_HORIZON_S,  # fixed timestamps from January
        },
    )


async def _wait_for(
    tail: OutputTail, seen: dict[str, list[object]], done: object, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for record in await tail.poll(1.0):
            seen.setdefault(record.kind, []).append(record.event)
        if callable(done) and done():
            return
    pytest.fail(f"timed out waiting; seen { {k: len(v) for k, v in seen.items()} }")


async def test_killed_worker_loses_no_answer_and_counts_none_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    answers: list[AnswerEvent] = [
        a.model_copy(update={"occurred_at": WINDOW_START + timedelta(seconds=index)})
        for index, a in enumerate(load_answers(SEED_LAB))
    ]
    first, second = answers[:6], answers[6:]
    seen: dict[str, list[object]] = {}

    def judged() -> set[str]:
        return {v.event_id for v in seen.get("verdict", []) if isinstance(v, Verdict)}

    async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
        crashing = WorkerProcess(settings, tmp_path / "worker-1.log").start()
        try:
            await publish_answers(settings.bootstrap_servers, settings.topics.answers, first)
            await _wait_for(tail, seen, lambda: len(judged()) >= 6, timeout_s=90)
        finally:
            crashing.kill()

        replacement = WorkerProcess(settings, tmp_path / "worker-2.log").start()
        try:
            await publish_answers(settings.bootstrap_servers, settings.topics.answers, second)

            def all_counted() -> bool:
                windows = [a for a in seen.get("aggregate", []) if isinstance(a, WindowAggregate)]
                latest = max(windows, key=lambda w: w.revision, default=None)
                return len(judged()) == 12 and latest is not None and latest.answers == 12

            await _wait_for(tail, seen, all_counted, timeout_s=120)
            await asyncio.sleep(2)  # a double count would show up as one more revision
            for record in await tail.poll(1.0):
                seen.setdefault(record.kind, []).append(record.event)
        finally:
            replacement.stop()

    assert judged() == {a.event_id for a in answers}
    windows = [a for a in seen["aggregate"] if isinstance(a, WindowAggregate)]
    final = max(windows, key=lambda w: w.revision)
    offline = build_judge(settings.judge).judge_batch(answers)
    assert final.answers == 12
    assert final.hallucinated == sum(j.hallucinated for j in offline if not j.abstained)
    assert final.abstentions == sum(j.abstained for j in offline)
