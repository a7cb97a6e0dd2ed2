"""``kill -USR1 <worker>``: log what every asyncio task is waiting on.

A worker whose event loop is idle but which makes no headway (a consumer-group rejoin
that never completes, a lock never released) shows nothing in py-spy, whose stacks are
those of threads, not of suspended coroutines. This dump names each task and the line
each of its awaits is suspended at, without stopping the worker.
"""

from __future__ import annotations

import asyncio
import signal

import structlog

__all__ = ["install_task_dump", "task_stacks"]

log = structlog.get_logger(__name__)


def task_stacks() -> dict[str, list[str]]:
    """Task name -> its suspended stack, outermost first (``file:line function``)."""
    stacks: dict[str, list[str]] = {}
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        name = f"{task.get_name()} ({getattr(coro, '__qualname__', coro)!s})"
        stacks[name] = [
            f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
            for frame in task.get_stack()
        ]
    return stacks


def install_task_dump(loop: asyncio.AbstractEventLoop) -> None:
    """On SIGUSR1, log one ``asyncio_tasks`` line with every task's stack."""
    loop.add_signal_handler(
        signal.SIGUSR1, lambda: log.warning("asyncio_tasks", tasks=task_stacks())
    )
