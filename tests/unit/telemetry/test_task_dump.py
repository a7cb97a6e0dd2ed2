"""The SIGUSR1 task dump names every task and the line each is suspended at."""

from __future__ import annotations

import asyncio
import os
import signal

import structlog

from streamproc.telemetry.task_dump import install_task_dump, task_stacks


async def _waits_for(event: asyncio.Event) -> None:
    await event.wait()


async def test_a_suspended_task_shows_the_coroutine_it_waits_in() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_waits_for(event), name="waiter")
    await asyncio.sleep(0)
    stacks = task_stacks()
    (name,) = [n for n in stacks if n.startswith("waiter ")]
    assert "_waits_for" in name
    assert any(line.endswith(" _waits_for") for line in stacks[name])
    event.set()
    await task


async def test_sigusr1_logs_the_tasks_and_the_process_goes_on() -> None:
    install_task_dump(asyncio.get_running_loop())
    try:
        with structlog.testing.capture_logs() as logs:
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.sleep(0.05)
        (dump,) = [entry for entry in logs if entry["event"] == "asyncio_tasks"]
        assert any("test_sigusr1_logs_the_tasks" in name for name in dump["tasks"])
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)
