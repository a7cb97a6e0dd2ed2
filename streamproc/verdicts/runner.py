"""Where the judging stage runs: in a thread of the worker, or in a process of its own.

The judge is CPU-bound Python around ONNX Runtime calls. In a thread it shares the
worker's GIL with the event loop, whose Kafka clients (fetching, decoding, the
transaction's round trips) then wait for the judge's Python between model calls, and
the judge waits for them: on QA-like traffic at half load the judge's own batch p99 was
3-6 times its offline p99 (CHANGELOG.md, 0.1.0). In its own process (``worker.judge_process``,
the default) the judge has an interpreter to itself; messages go in and the stage's
records come back pickled, and the worker's process keeps only the Kafka work.

What a process adds is a way to die apart from the worker. :class:`JudgeProcess` keeps
it visible: a child that cannot build its judge fails :meth:`JudgeRunner.start` with the
child's own error; a child that dies (killed, out of memory, a native crash) fails the
batch in flight and every later call with :class:`JudgeProcessDied`, so that batch is
never published or acknowledged and the worker exits (code 7) to be restarted; and
:meth:`JudgeRunner.watch` pings the child while the stream is quiet, so a dead judge ends
the worker at once rather than at the next answer. The child ignores SIGINT and SIGTERM
(a terminal's Ctrl-C and systemd's stop reach the whole process group; the worker
finishes its batch and then stops the child in order) and asks Linux to kill it when the
worker dies, so a worker killed with SIGKILL leaves no judge behind.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing import get_context
from typing import Any, NoReturn

from streamproc.contracts.events import JudgeInfo
from streamproc.judge import Judge
from streamproc.verdicts.catalog import OutputTopics
from streamproc.verdicts.stage import (
    IncomingMessage,
    StageLimits,
    StageOutput,
    judge_messages,
)

__all__ = [
    "JudgeFactory",
    "JudgeProcess",
    "JudgeProcessDied",
    "JudgeRunner",
    "JudgeThread",
    "LogOptions",
]

_PING_EVERY_S = 1.0


JudgeFactory = Callable[[], Judge]
"""Builds a judge: how a runner gets one without knowing the settings."""


class JudgeProcessDied(RuntimeError):
    """The judge's process ended under a call (killed, out of memory, a native crash)."""


class JudgeRunner(ABC):
    """Runs :func:`~streamproc.verdicts.stage.judge_messages` off the event loop, one
    batch at a time (a batch's outputs and offsets commit in order)."""

    pid: int | None = None
    """The judge's own process, once started; None when it is the worker's."""

    @abstractmethod
    async def start(self) -> JudgeInfo:
        """Have the judge ready (models loaded); its identity, as audit records carry it."""

    @abstractmethod
    async def judge(
        self, messages: Sequence[IncomingMessage], limits: StageLimits, topics: OutputTopics
    ) -> StageOutput:
        """The stage's output for one micro-batch (never raises for one message)."""

    async def watch(self) -> NoReturn:
        """Return only by raising, when the judge can no longer run (see subclasses)."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    @abstractmethod
    def close(self) -> None:
        """Let go of the thread or process (blocks until it has ended)."""


class JudgeThread(JudgeRunner):
    """The judge in one executor thread of the worker (``worker.judge_process = false``,
    and the tests that hand a judge to the loop directly)."""

    def __init__(self, judge: Judge, executor: Executor | None = None) -> None:
        self._judge = judge
        self._pool = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge")

    async def start(self) -> JudgeInfo:
        return self._judge.info

    async def judge(
        self, messages: Sequence[IncomingMessage], limits: StageLimits, topics: OutputTopics
    ) -> StageOutput:
        work = partial(judge_messages, messages, self._judge, limits=limits, topics=topics)
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass(frozen=True, slots=True)
class LogOptions:
    """How the child logs: as the worker does (``configure_logging``'s arguments), or
    not configured at all (None) when the worker's logging was not configured either."""

    level: str
    json_logs: bool
    log_texts: bool


class JudgeProcess(JudgeRunner):
    """The judge in a spawned child process of its own; see the module docstring."""

    def __init__(self, make_judge: JudgeFactory, log: LogOptions | None = None) -> None:
        """``make_judge`` builds the judge in the child; it must pickle (a module-level
        function or a ``functools.partial`` of one)."""
        self._pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=get_context("spawn"),  # never fork a process with running threads
            initializer=_child_start,
            initargs=(make_judge, log),
        )

    async def start(self) -> JudgeInfo:
        started: _Started = await self._call(_child_started)
        self.pid = started.pid
        return started.info

    async def judge(
        self, messages: Sequence[IncomingMessage], limits: StageLimits, topics: OutputTopics
    ) -> StageOutput:
        output: StageOutput = await self._call(_child_judge, list(messages), limits, topics)
        return output

    async def watch(self) -> NoReturn:
        """Ping the child every second; raise :class:`JudgeProcessDied` once it is gone.
        A ping queues behind a batch in flight: a judge that hangs is the stall watch's
        to report, not this one's."""
        while True:
            await asyncio.sleep(_PING_EVERY_S)
            await self._call(os.getpid)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    async def _call(self, fn: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool as exc:
            raise JudgeProcessDied(f"the judge's process (pid {self.pid}) ended: {exc}") from exc


# ------------------------------------------------------------------ in the child process


@dataclass(frozen=True, slots=True)
class _Started:
    pid: int
    info: JudgeInfo


_judge: Judge | None = None
_failed: BaseException | None = None


def _child_start(make_judge: JudgeFactory, log: LogOptions | None) -> None:
    """Pool initializer. A failure is kept and raised by the first call (an initializer
    that raises only breaks the pool, and the worker would never learn why)."""
    global _judge, _failed
    for stop in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C and systemd signal the whole group
        signal.signal(stop, signal.SIG_IGN)
    _die_with_parent()
    try:
        if log is not None:
            from streamproc.telemetry.logging import configure_logging

            configure_logging(log.level, json_logs=log.json_logs, log_texts=log.log_texts)
        _judge = make_judge()
    except BaseException as exc:  # noqa: BLE001 - handed to the worker by _child_started
        _failed = exc


def _child_started() -> _Started:
    judge = _child_judge_or_raise()
    return _Started(pid=os.getpid(), info=judge.info)


def _child_judge(
    messages: list[IncomingMessage], limits: StageLimits, topics: OutputTopics
) -> StageOutput:
    return judge_messages(messages, _child_judge_or_raise(), limits=limits, topics=topics)


def _child_judge_or_raise() -> Judge:
    if _failed is not None:
        raise _failed
    assert _judge is not None, "initializer did not run"
    return _judge


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the worker dies, even by SIGKILL (the pool's
    queues would otherwise keep an orphaned child waiting forever). Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the worker died before the line above took effect
        os._exit(1)
