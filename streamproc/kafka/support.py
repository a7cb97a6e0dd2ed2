"""Small pieces both consumer loops (judging, windows) share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence

import structlog
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

__all__ = ["bounded_close", "partition_names", "record_count"]

log = structlog.get_logger(__name__)

CLOSE_TIMEOUT_S = 10.0


async def bounded_close(closing: Awaitable[None], what: str) -> None:
    """Close a client, but never hang on it: after a failed publish the producer may
    still hold sends to a broker or topic that is gone, and the process must exit."""
    try:
        await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    except (TimeoutError, KafkaError, OSError) as exc:
        log.warning("client_close_failed", client=what, error=repr(exc))
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # we are being cancelled: never swallow that
        # A client's own task cancelled while it closed (a failed publish during a
        # broker restart does it): it must not replace the error that ended the loop.
        log.warning("client_close_failed", client=what, error=repr(exc))


def partition_names(partitions: Iterable[TopicPartition]) -> list[str]:
    return [f"{tp.topic}/{tp.partition}" for tp in partitions]


def record_count(batch: Mapping[TopicPartition, Sequence[object]]) -> int:
    return sum(len(records) for records in batch.values())
