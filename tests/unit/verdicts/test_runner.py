"""The judge in a process of its own: the same records as in a thread, its failures
visible to the worker (a judge it cannot build, a child killed mid-batch or while idle),
and no child left behind when the worker is killed."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from streamproc.config import Settings
from streamproc.inference.options import InferenceSettings, JudgeSettings
from streamproc.verdicts.options import WorkerSettings
from streamproc.verdicts.runner import (
    JudgeProcess,
    JudgeProcessDied,
    JudgeThread,
)
from streamproc.verdicts.stage import StageLimits
from streamproc.wiring import build_judge, judge_runner
from tests.unit.verdicts.test_stage import BAD, GOOD, TOPICS, message

RULES = JudgeSettings(name="rules")
LIMITS = StageLimits(audit_settings={"judge": {"name": "rules"}})


MESSAGES = [
    message(GOOD, 0, trace="ab" * 16),
    message(b"{oops", 1),
    message(BAD, 2),
]


@pytest.fixture
async def child() -> AsyncIterator[JudgeProcess]:
    runner = JudgeProcess(partial(build_judge, RULES))
    try:
        yield runner
    finally:
        await asyncio.to_thread(runner.close)


async def test_a_process_gives_the_records_a_thread_gives(child: JudgeProcess) -> None:
    info = await child.start()
    assert child.pid is not None and child.pid != os.getpid()
    thread = JudgeThread(build_judge(RULES))
    assert info == await thread.start()
    there = await child.judge(MESSAGES, LIMITS, TOPICS)
    here = await thread.judge(MESSAGES, LIMITS, TOPICS)
    thread.close()
    assert [(r.topic, r.key, r.headers) for r in there.records] == [
        (r.topic, r.key, r.headers) for r in here.records
    ]
    assert there.verdict_origins == here.verdict_origins
    assert [v.judgement for v in there.verdicts] == [v.judgement for v in here.verdicts]
    assert [v.judge for v in there.verdicts] == [info, info]  # the audit's identity
    [letter] = there.dead_letters
    assert (letter.reason, letter.offset) == (here.dead_letters[0].reason, 1)
    assert base64.b64decode(letter.value_b64) == b"{oops"
    assert {t.name for t in there.stage_times} == {t.name for t in here.stage_times}
    assert there.verdicts[0].trace_id == "ab" * 16


async def test_a_judge_the_child_cannot_build_fails_start_with_its_error() -> None:
    missing = InferenceSettings(nli_model="no-such-model")
    runner = JudgeProcess(partial(build_judge, JudgeSettings(name="nli", inference=missing)))
    try:
        with pytest.raises(Exception, match="no-such-model"):
            await runner.start()
    finally:
        await asyncio.to_thread(runner.close)


async def test_a_killed_child_fails_the_batch_under_way_and_every_later_call(
    child: JudgeProcess,
) -> None:
    await child.start()
    assert child.pid is not None

    async def kill_soon() -> None:
        await asyncio.sleep(0.05)
        os.kill(child.pid or 0, signal.SIGKILL)

    killer = asyncio.create_task(kill_soon())
    with pytest.raises(JudgeProcessDied, match=str(child.pid)):
        while True:  # batches until one is under way when the kill lands
            await child.judge(MESSAGES, LIMITS, TOPICS)
    await killer
    with pytest.raises(JudgeProcessDied):
        await child.judge(MESSAGES, LIMITS, TOPICS)


async def test_watch_reports_a_child_that_died_while_idle(child: JudgeProcess) -> None:
    await child.start()
    watching = asyncio.create_task(child.watch())
    await asyncio.sleep(0.2)
    assert not watching.done()  # a live child: the watch keeps pinging
    os.kill(child.pid or 0, signal.SIGKILL)
    with pytest.raises(JudgeProcessDied):
        await asyncio.wait_for(watching, timeout=10)


def test_settings_choose_the_runner() -> None:
    in_thread = Settings(judge=RULES, worker=WorkerSettings(judge_process=False))
    runner = judge_runner(in_thread)
    assert isinstance(runner, JudgeThread)
    runner.close()
    assert Settings().worker.judge_process  # the default: a process of its own
    process = judge_runner(Settings(judge=RULES))
    assert isinstance(process, JudgeProcess)
    process.close()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_killed_with_sigkill_leaves_no_judge_process(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from streamproc.config import JudgeSettings
        from functools import partial
        from streamproc.verdicts.runner import JudgeProcess
        from streamproc.wiring import build_judge

        async def main() -> None:
            runner = JudgeProcess(partial(build_judge, JudgeSettings(name="rules")))
            await runner.start()
            print(runner.pid, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    child_pid = 0
    try:
        assert worker.stdout is not None
        child_pid = int(worker.stdout.readline())
        assert _alive(child_pid)
        worker.kill()
        worker.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child_pid)
    finally:
        worker.kill()
        if child_pid and _alive(child_pid):  # the failing case: do not leave it running
            os.kill(child_pid, signal.SIGKILL)
