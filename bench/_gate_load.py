"""The gate benchmark's load generator: the answers sent, when they are sent (seeded
Poisson arrivals), and the open and closed loops that send them, each request timed as
a :class:`Sample`. What the samples mean is :mod:`bench._gate_summary`'s business."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._answer_pool import Answers, event_pool
from bench._gate_callers import Caller, Reply
from streamproc.contracts.events import AnswerEvent

__all__ = [
    "KINDS",
    "Sample",
    "answer_pool",
    "bodies",
    "closed_loop",
    "indexed_bodies",
    "open_loop",
    "poisson_schedule",
]

KINDS: dict[str, tuple[str, ...]] = {"qa": ("QA",), "ragtruth": ("Summary", "Data2txt")}
"""Answer kinds and the task types each is drawn from."""


def answer_pool(kind: str, data: Sequence[Path] | None) -> tuple[list[AnswerEvent], str]:
    """The distinct answers of ``kind``, in ``python -m bench stream``'s order."""
    return event_pool(data, list(KINDS[kind]))


def bodies(answers: Answers, count: int) -> list[bytes]:
    """``count`` request bodies, made before a level starts so that serialising an
    answer never delays a scheduled send."""
    return [body for _, body in indexed_bodies(answers, count)]


def indexed_bodies(answers: Answers, count: int) -> list[tuple[int | None, bytes]]:
    """As :func:`bodies`, each with its answer's pool index on its first use (None for
    a repeat): what pairs a gate decision with the judge alone on the same answer."""
    out: list[tuple[int | None, bytes]] = []
    for _ in range(count):
        index = answers.taken
        first_use = index < answers.size
        out.append((index if first_use else None, answers.take()[2]))
    return out


def poisson_schedule(rate_per_s: float, duration_s: float, seed: int) -> list[float]:
    """Send times (seconds from the start, below ``duration_s``) of a Poisson process of
    ``rate_per_s``: exponential gaps, seeded, so a run is repeatable. Random arrivals
    bunch up as real callers do; a fixed pace would flatter the queue."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate must be a positive number, not {rate_per_s}")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number, not {duration_s}")
    rng = random.Random(seed)
    times: list[float] = []
    at = rng.expovariate(rate_per_s)
    while at < duration_s:
        times.append(at)
        at += rng.expovariate(rate_per_s)
    return times


@dataclass(frozen=True, slots=True)
class Sample:
    """One request: when it was due, when it went, when its reply came (monotonic s)."""

    due: float
    sent: float
    done: float
    reply: Reply
    pool_index: int | None = None
    """The answer's place in the pool on its first use (None: a repeat, or not tracked)."""

    @property
    def latency_ms(self) -> float:
        """From the scheduled send to the reply: what the caller waited."""
        return (self.done - self.due) * 1000


async def _one(
    caller: Caller, body: bytes, budget_ms: float | None, due: float, index: int | None = None
) -> Sample:
    sent = time.monotonic()
    reply = await caller.check(body, budget_ms)
    return Sample(due, sent, time.monotonic(), reply, index)


async def open_loop(
    caller: Caller,
    payloads: Sequence[tuple[int | None, bytes]],
    schedule: Sequence[float],
    budget_ms: float | None,
) -> list[Sample]:
    """Every payload (pool index, body) sent at its scheduled time as a task of its own,
    whether or not earlier ones were answered; then every reply awaited."""
    start = time.monotonic()
    tasks = []
    for offset, (index, body) in zip(schedule, payloads, strict=True):
        due = start + offset
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(caller, body, budget_ms, due, index)))
    return list(await asyncio.gather(*tasks))


async def closed_loop(
    caller: Caller,
    next_body: Callable[[], bytes],
    callers: int,
    duration_s: float,
    budget_ms: float,
) -> tuple[list[Sample], float]:
    """``callers`` callers, each sending again as soon as it is answered, for
    ``duration_s``; returns the samples and the start time."""
    start = time.monotonic()
    end = start + duration_s
    samples: list[Sample] = []

    async def run() -> None:
        while time.monotonic() < end:
            now = time.monotonic()
            samples.append(await _one(caller, next_body(), budget_ms, now))

    await asyncio.gather(*(run() for _ in range(callers)))
    return samples, start
