"""The replay's Kafka side: the worker's settings for one run, the reader of what the
worker writes, and the producers of the answers and the labels.

It changes when the topics, the worker's settings or the clients change, not when the
replayed rows or the reported numbers do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from bench.stream import run_topics
from scripts._replay_reviews_rows import Row
from streamproc.config import Settings
from streamproc.contracts.events import AnswerOutcome, Verdict
from streamproc.contracts.label_events import JudgeAccuracyEvent, LabelEvent, ReviewItem

__all__ = ["Reader", "produce", "publish_labels", "replay_settings", "wait_for_topics"]


def replay_settings(
    bootstrap: str, app_id: str, judge: str, *, sample_rate: float, seed: int, min_labels: int
) -> Settings:
    """Product defaults, every topic unique to this run, the review sample rate and the
    labels a cell needs before it is live."""
    groups = run_topics(app_id)
    return Settings(
        app_id=app_id,
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        log_level="INFO",
        **{name: group for name, group in groups.items() if name not in ("review", "labels")},
        judge={"name": judge},
        review={**groups["review"], "sample_rate": sample_rate, "seed": seed},
        labels={**groups["labels"], "min_labels": min_labels},
    )


@dataclass
class Reader:
    """A read_committed reader of the verdicts, outcomes, review queue, dead letters and
    judge-accuracy events of the run."""

    settings: Settings
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    outcomes: dict[str, AnswerOutcome] = field(default_factory=dict)
    items: dict[str, ReviewItem] = field(default_factory=dict)
    accuracy: dict[str, JudgeAccuracyEvent] = field(default_factory=dict)
    dead_letters: int = 0
    last_verdict_at: float = field(default_factory=time.monotonic)
    _consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            *self._topics(),
            bootstrap_servers=self.settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            metadata_max_age_ms=2000,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    def _topics(self) -> tuple[str, ...]:
        s = self.settings
        return (
            s.topics.verdicts,
            s.topics.outcomes,
            s.topics.dead_letter,
            s.review.queue_topic,
            s.labels.accuracy_topic,
        )

    async def poll(self) -> None:
        assert self._consumer is not None
        s = self.settings
        for tp, records in (await self._consumer.getmany(timeout_ms=500)).items():
            for record in records:
                value = record.value or b""
                if tp.topic == s.topics.verdicts:
                    verdict = Verdict.model_validate_json(value)
                    self.verdicts[verdict.answer_id] = verdict
                    self.last_verdict_at = time.monotonic()
                elif tp.topic == s.topics.outcomes:
                    outcome = AnswerOutcome.model_validate_json(value)
                    if outcome.answer_id is not None:
                        self.outcomes[outcome.answer_id] = outcome
                elif tp.topic == s.review.queue_topic:
                    item = ReviewItem.model_validate_json(value)
                    self.items[item.answer_id] = item
                elif tp.topic == s.labels.accuracy_topic and record.value is not None:
                    event = JudgeAccuracyEvent.model_validate_json(value)
                    self.accuracy[event.cell.key] = event
                elif tp.topic == s.topics.dead_letter:
                    self.dead_letters += 1

    async def at_end(self, topic: str) -> bool:
        """Whether every partition of ``topic`` has been read to its (stable) end."""
        assert self._consumer is not None
        parts = [tp for tp in self._consumer.assignment() if tp.topic == topic]
        if not parts:
            return False
        ends: dict[TopicPartition, int] = await self._consumer.end_offsets(parts)
        for tp, end in ends.items():
            if await self._consumer.position(tp) < end:
                return False
        return True


async def produce(settings: Settings, rows: Sequence[Row], rate: float | None) -> None:
    """The rows' answers to the answers topic, ``occurred_at`` = now, at ``rate``/s (or
    all at once)."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        started = time.monotonic()
        for index, row in enumerate(rows):
            if rate:
                await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
            event = row.event.model_copy(update={"occurred_at": datetime.now(UTC)})
            await producer.send(
                settings.topics.answers,
                key=event.conversation_id.encode(),
                value=event.model_dump_json(exclude_none=True).encode(),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_labels(settings: Settings, labels: Sequence[LabelEvent]) -> None:
    """The stand-in reviewers' labels to the labels topic."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for label in labels:
            await producer.send(
                settings.review.labels_topic,
                key=label.answer_id.encode(),
                value=label.model_dump_json().encode(),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def wait_for_topics(settings: Settings) -> None:
    """The worker creates the topics; produce only once the answers topic exists."""
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=None)
    await probe.start()
    try:
        deadline = time.monotonic() + 300
        while settings.labels.accuracy_topic not in await probe.topics():
            if time.monotonic() > deadline:
                raise SystemExit("the worker never created its topics")
            await asyncio.sleep(1.0)
    finally:
        await probe.stop()
