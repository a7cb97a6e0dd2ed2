"""The stream benchmark's load: answers produced to the answers topic, as a backlog at
once or paced at a fixed rate whatever the stream does, and the warm-up answer per
partition before a phase is measured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from bench._answer_pool import Answers
from bench._stream_reader import VerdictReader
from bench._stream_workers import wait_settled
from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent

__all__ = ["Produced", "produce_backlog", "produce_paced", "warm_up"]


@dataclass
class Produced:
    """What a phase sent: answer id -> send time, and how late each send was."""

    sent: dict[str, float] = field(default_factory=dict)
    slips: list[float] = field(default_factory=list)


async def warm_up(
    producer: AIOKafkaProducer,
    settings: Settings,
    pool: Sequence[AnswerEvent],
    reader: VerdictReader,
    workers: Sequence[WorkerProcess],
) -> None:
    """One answer per partition, from the end of the pool, until all are decided."""
    warm = Answers(list(reversed(pool)), f"{settings.app_id}-warm")
    ids = set()
    for partition in range(settings.topics.partitions):
        answer_id, key, value = warm.take()
        await producer.send(settings.topics.answers, value, key=key, partition=partition)
        ids.add(answer_id)
    await producer.flush()
    await wait_settled(reader, ids, workers)
    if reader.settled(ids) < len(ids):
        raise RuntimeError(f"warm-up answers undecided:\n{workers[0].log_tail()}")


async def produce_backlog(
    producer: AIOKafkaProducer, topic: str, answers: Answers, count: int
) -> Produced:
    """``count`` answers as fast as the client takes them."""
    produced = Produced()
    for _ in range(count):
        answer_id, key, value = answers.take()
        produced.sent[answer_id] = time.monotonic()
        await producer.send(topic, value, key=key)
    await producer.flush()
    return produced


async def produce_paced(
    producer: AIOKafkaProducer, topic: str, answers: Answers, schedule: Sequence[float]
) -> Produced:
    """One answer at each time of ``schedule`` (seconds from now), never waiting for
    an earlier send to be acknowledged."""
    produced = Produced()
    start = time.monotonic()
    for offset in schedule:
        delay = start + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        answer_id, key, value = answers.take()
        now = time.monotonic()
        produced.slips.append(max(0.0, now - start - offset))
        produced.sent[answer_id] = now
        await producer.send(topic, value, key=key)
    await producer.flush()
    return produced
