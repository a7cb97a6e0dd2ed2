"""The judge's own process on a real broker: killed under a backlog it ends its worker
(exit 7, nothing of its batch acknowledged), a SIGTERM to the whole process group (as
systemd and a terminal send) still stops the worker in order, and the replacements judge
every answer exactly once."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.cli.worker import EXIT_JUDGE_DIED
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, Verdict
from streamproc.kafka.clients import OutputTail, publish_answers
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import prepare_topics
from tests.integration.run_settings import run_settings

ANSWERS = 120


def _settings(bootstrap: str) -> Settings:
    return run_settings(
        bootstrap,
        "judgeproc",
        partitions=3,
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 6.0, "batch_max": 8},
    )


def _answers() -> list[AnswerEvent]:
    seeds = load_answers(SEED_LAB)
    now = datetime.now(UTC)
    return [
        seeds[i % len(seeds)].model_copy(
            update={"event_id": f"e{i}", "answer_id": f"a{i}", "occurred_at": now}
        )
        for i in range(ANSWERS)
    ]


def _judge_pid(worker: WorkerProcess, timeout_s: float = 60.0) -> int:
    """The judge's process, from the worker's ``worker_starting`` log line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in worker.log_path.read_text(errors="replace").splitlines():
            if '"worker_starting"' in line:
                pid = json.loads(line)["judge_pid"]
                assert isinstance(pid, int) and pid != worker.pid
                return pid
        time.sleep(0.2)
    pytest.fail(f"worker never started:\n{worker.log_tail()}")


async def _drain(tail: OutputTail, verdicts: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for record in await tail.poll(0.5):
            if isinstance(record.event, Verdict):
                verdicts.append(record.event.event_id)


async def _collect(tail: OutputTail, verdicts: list[str], until: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(set(verdicts)) < until:
        for record in await tail.poll(0.5):
            if isinstance(record.event, Verdict):
                verdicts.append(record.event.event_id)
    assert len(set(verdicts)) >= until, f"{len(set(verdicts))} of {until} verdicts"


async def test_a_dead_judge_process_ends_its_worker_and_nothing_is_lost(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    answers = _answers()
    verdicts: list[str] = []
    async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
        first = WorkerProcess(settings, tmp_path / "worker-1.log").start()
        try:
            judge_pid = _judge_pid(first)
            await publish_answers(settings.bootstrap_servers, settings.topics.answers, answers)
            await _collect(tail, verdicts, until=8, timeout_s=90)
            killed_at = time.monotonic()
            os.kill(judge_pid, signal.SIGKILL)  # mid-backlog: a batch is being judged
            code = first.wait(30)
            print(f"worker exited {code} {time.monotonic() - killed_at:.2f} s after the kill")
            log = first.log_tail(200)
        finally:
            first.kill()
        assert code == EXIT_JUDGE_DIED, log
        assert "judge_process_died_exiting" in log
        await _drain(tail, verdicts, seconds=3.0)  # what the first worker committed
        before = len(set(verdicts))
        assert before < ANSWERS
        print(f"{before} of {ANSWERS} verdicts published before the judge process died")

        second = WorkerProcess(settings, tmp_path / "worker-2.log").start()
        try:
            _judge_pid(second)  # running, its signal handlers in place
            await _collect(tail, verdicts, until=before + 8, timeout_s=90)
            # SIGTERM to its process group, the judge included. Up to a minute: each
            # client's close is bounded at 10 s, and on a loaded CI machine one took the
            # worker past the default 20 s once, with nothing logged meanwhile.
            stopped = second.stop(timeout_s=60.0)
            log = second.log_tail(200)
        finally:
            second.kill()
        assert stopped == 0, log
        assert "worker_stopped" in log and "judge_process_died" not in log

        third = WorkerProcess(settings, tmp_path / "worker-3.log").start()
        try:
            await _collect(tail, verdicts, until=ANSWERS, timeout_s=120)
            await _drain(tail, verdicts, seconds=2.0)  # a duplicate would arrive by now
        finally:
            third.stop()
    assert sorted(verdicts) == sorted(a.event_id for a in answers)  # each exactly once
