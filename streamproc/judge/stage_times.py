"""Where a judge's time goes, per batch, without the judge knowing who asks.

A caller that wants the stages (the stream worker turns them into trace spans) collects
them around ``judge_batch``; the judge marks its stages with :func:`stage`, which costs
one context-variable read when nobody collects. Context variables are per thread, and the
worker calls the judge inside the executor thread that collects, so concurrent batches
never mix. The judge imports nothing of telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

__all__ = ["StageTime", "collecting", "stage"]


class StageTime(NamedTuple):
    name: str
    start_ns: int
    """Wall clock, ns since the epoch (``time.time_ns``), as trace spans want."""
    end_ns: int


_SINK: ContextVar[list[StageTime] | None] = ContextVar("streamproc_judge_stages", default=None)


@contextmanager
def collecting() -> Iterator[list[StageTime]]:
    """Collect the stages judged inside the block, in the order they end."""
    times: list[StageTime] = []
    token = _SINK.set(times)
    try:
        yield times
    finally:
        _SINK.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark the body as stage ``name`` of the batch being judged (recorded even if it
    raises: a stage that timed out shows how long it ran)."""
    sink = _SINK.get()
    if sink is None:
        yield
        return
    start = time.time_ns()
    try:
        yield
    finally:
        sink.append(StageTime(name, start, time.time_ns()))
