"""Consumer loops run as tasks of the test's event loop, for the tests that drive loops
in-process on the real broker."""

from __future__ import annotations

import asyncio

from streamproc.kafka.consumer import ConsumerLoop

__all__ = ["RunningLoops"]


class RunningLoops:
    """Loops running as tasks in this event loop; stopped and awaited on exit."""

    def __init__(self, *loops: ConsumerLoop) -> None:
        self.loops = loops
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> RunningLoops:
        self.tasks = [asyncio.create_task(loop.run()) for loop in self.loops]
        return self

    def check(self) -> None:
        """Fail the test at once when a loop ended (none may, whatever its input)."""
        for task in self.tasks:
            if task.done():
                raise AssertionError(f"a loop ended: {task.exception()!r}")

    async def __aexit__(self, *exc: object) -> None:
        for loop in self.loops:
            loop.stop()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 30)
