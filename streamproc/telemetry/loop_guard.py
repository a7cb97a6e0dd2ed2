"""A thread that watches the asyncio event loop itself.

Everything else that reports a stall (the progress watch, ``/livez``) runs on the event
loop; if the loop is blocked, none of it runs and the worker goes quiet. This guard lives
on its own thread: when the loop has not ticked for ``blocked_after_s``, it writes every
thread's stack to stderr, logs one line and ends the process (exit 5), so the
orchestrator restarts it instead of it sitting silent.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import threading
import time

import structlog

__all__ = ["EXIT_LOOP_BLOCKED", "LoopGuard"]

log = structlog.get_logger(__name__)

EXIT_LOOP_BLOCKED = 5


class LoopGuard:
    """``await guard.beat()`` in a task ticks; the guard thread checks the ticks."""

    def __init__(self, blocked_after_s: float, *, check_every_s: float = 1.0) -> None:
        self._blocked_after_s = blocked_after_s
        self._check_every_s = check_every_s
        self._last_tick = time.monotonic()
        self._stop = threading.Event()

    async def beat(self) -> None:
        """Tick every second until cancelled (runs on the watched loop)."""
        while True:
            self._last_tick = time.monotonic()
            await asyncio.sleep(min(1.0, self._blocked_after_s / 4))

    def start(self) -> None:
        threading.Thread(target=self._watch, name="loop-guard", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self._check_every_s):
            silent = time.monotonic() - self._last_tick
            if silent > self._blocked_after_s:
                log.error("event_loop_blocked_exiting", seconds=round(silent, 1))
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                logging.shutdown()
                os._exit(EXIT_LOOP_BLOCKED)
