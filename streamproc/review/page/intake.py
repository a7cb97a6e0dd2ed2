"""Fills the review page's queue from the queue topic.

A consumer in the group ``<app_id>.review-page`` reads ``review.queue_topic``
(``read_committed``: only items of batches the worker committed), stores each batch in
the queue store, and commits the batch's offsets only after the database has committed,
so a crash between the two redelivers items the store then recognises by answer id.
A record that is not a review item is logged (topic, partition, offset - never its text)
and skipped; a broker or database that is down is waited for. Nothing here stops the page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from pydantic import ValidationError

from streamproc.contracts.label_events import ReviewItem
from streamproc.contracts.topic_names import TopicNames
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.security import aiokafka_options
from streamproc.review.page.queue_store import ReviewQueueStore

__all__ = ["IntakeStats", "ReviewIntake", "intake_group", "read_items"]

log = structlog.get_logger(__name__)

DEFAULT_MAX_FETCH_BYTES = 8 * 1024 * 1024
"""A review item carries the answer and its evidence: as large as an audit record."""
_MAX_RECORDS = 500
_RETRY_FIRST_S = 0.5
_RETRY_MAX_S = 30.0


class _QueueMessage(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...


def intake_group(names: TopicNames) -> str:
    return names.group("review-page")


@dataclass(slots=True)
class IntakeStats:
    """What the intake has done, for ``/healthz``."""

    read: int = 0
    queued: int = 0
    unreadable: int = 0
    connected: bool = False
    last_error: str | None = None


def read_items(messages: Iterable[_QueueMessage]) -> tuple[list[ReviewItem], int]:
    """The review items among ``messages``, and how many were unreadable (logged)."""
    items: list[ReviewItem] = []
    unreadable = 0
    for message in messages:
        try:
            items.append(ReviewItem.model_validate_json(message.value or b""))
        except ValidationError as exc:
            unreadable += 1
            log.warning(
                "review_item_unreadable",
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                errors=exc.error_count(),
                first_error=exc.errors(include_input=False, include_url=False)[0]["msg"],
            )
    return items, unreadable


def next_offsets(
    batches: Mapping[TopicPartition, Sequence[_QueueMessage]],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets to commit once ``batches`` are stored: each partition's last + 1."""
    return {
        tp: OffsetAndMetadata(messages[-1].offset + 1, "")
        for tp, messages in batches.items()
        if messages
    }


class ReviewIntake:
    """The queue topic into the store, for as long as :meth:`run` runs."""

    def __init__(
        self,
        store: ReviewQueueStore,
        connection: KafkaConnection,
        names: TopicNames,
        *,
        max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
        poll_timeout_s: float = 1.0,
    ) -> None:
        """``names``: the queue topic read (``review_queue``) and the app id naming the
        consumer group."""
        self._store = store
        self._connection = connection
        self._names = names
        self._max_fetch_bytes = max_fetch_bytes
        self._poll_timeout_ms = int(poll_timeout_s * 1000)
        self.stats = IntakeStats()

    def _consumer(self) -> AIOKafkaConsumer:
        connection = self._connection
        return AIOKafkaConsumer(
            self._names.review_queue,
            bootstrap_servers=connection.bootstrap_servers,
            group_id=intake_group(self._names),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            max_partition_fetch_bytes=self._max_fetch_bytes,
            fetch_max_bytes=max(self._max_fetch_bytes, 52_428_800),
            **aiokafka_options(connection.security),
        )

    async def run(self) -> None:
        """Consume until cancelled; a lost broker is reconnected to, with backoff."""
        delay = _RETRY_FIRST_S
        while True:
            consumer = self._consumer()
            try:
                await consumer.start()
                self.stats.connected = True
                self.stats.last_error = None
                log.info("review_intake_started", topic=self._names.review_queue)
                delay = _RETRY_FIRST_S
                await self._consume(consumer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the page stays up; the broker comes back
                self.stats.connected = False
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("review_intake_failed", error=self.stats.last_error, retry_s=delay)
            finally:
                self.stats.connected = False
                await _stop_quietly(consumer)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)

    async def _consume(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batches: dict[TopicPartition, list[Any]] = await consumer.getmany(
                timeout_ms=self._poll_timeout_ms, max_records=_MAX_RECORDS
            )
            if not batches:
                continue
            messages = [m for tp in sorted(batches) for m in batches[tp]]
            items, unreadable = read_items(messages)
            queued = await self._store_batch(items)
            self.stats.read += len(messages)
            self.stats.unreadable += unreadable
            self.stats.queued += queued
            await consumer.commit(next_offsets(batches))
            log.debug("review_items_queued", read=len(messages), queued=queued)

    async def _store_batch(self, items: list[ReviewItem]) -> int:
        """Store the batch; a database that fails is retried (the offsets wait)."""
        delay = _RETRY_FIRST_S
        while True:
            try:
                return await asyncio.to_thread(self._store.add, items)
            except Exception as exc:  # noqa: BLE001 - retried: the batch must not be lost
                self.stats.last_error = f"store: {type(exc).__name__}"
                log.warning("review_store_failed", error=type(exc).__name__, retry_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)


async def _stop_quietly(consumer: AIOKafkaConsumer) -> None:
    try:
        await consumer.stop()
    except Exception as exc:  # noqa: BLE001 - stopping a broken client must not mask why
        log.debug("review_intake_stop_failed", error=type(exc).__name__)
