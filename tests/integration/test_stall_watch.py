"""A worker that owns partitions with lag but makes no progress says so, on real Kafka.

The judge here hangs (a stand-in for a dead agent or a stuck thread); within
``stall_after_s`` plus one check the loop logs ``worker_stalled``, ``/livez`` answers 503,
and once the judge is released and the backlog is acknowledged it is live again.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import aiohttp

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, AnswerJudgement
from streamproc.kafka.clients import publish_answers
from streamproc.monitor.judging_loop import JudgeLoop
from streamproc.samples import SEED_LAB, load_answers
from streamproc.web.health import HealthServer, HealthState
from streamproc.wiring import kafka_loop_options, prepare_topics, stage_limits
from tests.integration.wrapped_judge import WrappedJudge


class _HangingJudge(WrappedJudge):
    """The rules judge, except that it blocks until ``release`` is set."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.release = threading.Event()

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        self.release.wait(120)
        return super().judge_batch(answers)


async def _livez(port: int) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/livez") as response,
    ):
        return response.status


async def test_a_stalled_worker_reports_itself_not_live_and_recovers(kafka_bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    settings = Settings(
        app_id=f"stall-{run}",
        broker_url=f"kafka://{kafka_bootstrap}",
        topics={**{name: f"stall-{run}.{name}" for name in names}, "partitions": 2},
        judge={"name": "rules"},
        worker={"stall_after_s": 3.0, "session_timeout_s": 6.0, "rebalance_timeout_s": 30.0},
    )
    await prepare_topics(settings)
    judge = _HangingJudge(settings)
    loop = JudgeLoop(kafka_loop_options(settings), judge, limits=stage_limits(settings))
    health = HealthServer(
        lambda: HealthState(live=loop.live, ready=loop.started, detail={}),
        host="127.0.0.1",
        port=0,
    )
    await health.start()
    assert health.port is not None
    task = asyncio.create_task(loop.run())
    try:
        answers = [
            a.model_copy(update={"occurred_at": datetime.now(UTC)})
            for a in load_answers(SEED_LAB)[:4]
        ]
        await publish_answers(settings.bootstrap_servers, settings.topics.answers, answers)
        assert await _livez(health.port) == 200
        stalled_after = await _until(lambda: not loop.live, timeout_s=30)
        assert await _livez(health.port) == 503
        judge.release.set()
        await _until(lambda: loop.live and loop.judged == 4, timeout_s=30)
        assert await _livez(health.port) == 200
    finally:
        judge.release.set()
        loop.stop()
        await asyncio.wait_for(task, 30)
        await health.stop()
    assert stalled_after >= 3.0, "never before the limit"


async def _until(condition: object, *, timeout_s: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if callable(condition) and condition():
            return time.monotonic() - began
        await asyncio.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout_s} s")
