"""The loop guard ends a process whose event loop is blocked, and leaves a busy but
responsive one alone (run in child processes: the guard exits the process)."""

from __future__ import annotations

import subprocess
import sys

from streamproc.telemetry.loop_guard import EXIT_LOOP_BLOCKED

_SCRIPT = """
import asyncio, time
from streamproc.telemetry.logging import configure_logging
from streamproc.telemetry.loop_guard import LoopGuard

async def main(block):
    guard = LoopGuard(blocked_after_s=0.6, check_every_s=0.1)
    guard.start()
    beat = asyncio.create_task(guard.beat())
    await asyncio.sleep(0.3)
    if block:
        time.sleep(5)  # a blocking call on the loop: nothing else can run
    else:
        for _ in range(20):
            await asyncio.sleep(0.1)
    beat.cancel()
    print("finished")

configure_logging("INFO", json_logs=True)
asyncio.run(main({block}))
"""


def _run(block: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(block=block)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_blocked_loop_ends_the_process_with_a_stack_dump() -> None:
    done = _run(block=True)
    assert done.returncode == EXIT_LOOP_BLOCKED, done.stderr
    assert "event_loop_blocked_exiting" in done.stderr
    assert "time.sleep" in done.stderr or "main" in done.stderr  # the stacks were dumped
    assert "finished" not in done.stdout


def test_a_responsive_loop_is_left_alone() -> None:
    done = _run(block=False)
    assert done.returncode == 0, done.stderr
    assert "finished" in done.stdout
