"""Stable committed offsets on real Kafka 4.1.1: pending transactional offsets are waited
for, never read as the older committed ones (what aiokafka's own offset fetch returns)."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamproc.config import Settings
from streamproc.kafka.consumer import ConsumerLoop
from streamproc.kafka.stable_offsets import stable_committed
from streamproc.wiring import kafka_loop_options
from tests.integration.run_settings import run_settings


async def _create(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()


async def test_pending_offsets_are_waited_for_until_their_transaction_commits(
    kafka_bootstrap: str,
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"stable-{run}", f"stable-{run}.group"
    tp = TopicPartition(topic, 0)
    await _create(kafka_bootstrap, topic)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=f"stable-{run}", acks="all"
    )
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    await producer.start()
    await consumer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"x", partition=0)
        assert await stable_committed(consumer, group, [tp], timeout_s=10) == {}

        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(1, "")}, group)
        # Pending: aiokafka's plain fetch says "no offset"; the stable fetch will not.
        assert (await consumer._coordinator.fetch_committed_offsets([tp])) == {}
        assert await stable_committed(consumer, group, [tp], timeout_s=1.0) is None

        async def commit_soon() -> None:
            await asyncio.sleep(1.0)
            await producer.commit_transaction()

        committing = asyncio.create_task(commit_soon())
        assert await stable_committed(consumer, group, [tp], timeout_s=20) == {tp: 1}
        await committing

        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(5, "")}, group)
        await producer.abort_transaction()
        assert await stable_committed(consumer, group, [tp], timeout_s=20) == {tp: 1}
    finally:
        await consumer.stop()
        await producer.stop()


class _OffsetsSeen(ConsumerLoop):
    """A consumer loop that handles a record by noting its offset, in a transaction."""

    def __init__(self, settings: Settings, topic: str) -> None:
        super().__init__(
            kafka_loop_options(settings),
            name="seen",
            topic=topic,
            client_options=None,
            consumer_options={},
            producer_options={},
        )
        self.seen: list[int] = []
        self.revocations = 0

    async def _step(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=100)
        read_at = self._read_epoch
        async with self._lock:
            if not batch or not self._admit(batch, read_at):
                return
            offsets = {tp: records[-1].offset + 1 for tp, records in batch.items() if records}
            await self._publisher.publish([], offsets)
            self.seen += [r.offset for records in batch.values() for r in records]

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self.revocations += bool(partitions)


async def test_a_loop_waits_out_pending_offsets_longer_than_its_session_and_keeps_its_place(
    kafka_bootstrap: str,
) -> None:
    """A killed owner's transaction holds the group's offsets until the broker aborts it,
    longer than a session; aiokafka sends no heartbeat while ``on_partitions_assigned``
    runs. The loop keeps the partition paused instead of waiting there: it is never
    dropped from its group, and once the offsets are stable it reads from them, once."""
    settings = run_settings(
        kafka_bootstrap,
        "stable-loop",
        partitions=1,
        worker={"session_timeout_s": 6.0, "rebalance_timeout_s": 10.0},
    )
    topic = settings.topics.answers
    await _create(kafka_bootstrap, topic)
    tp = TopicPartition(topic, 0)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=f"{settings.app_id}.dead", acks="all"
    )
    await producer.start()
    loop = _OffsetsSeen(settings, topic)
    running: asyncio.Task[None] | None = None
    try:
        async with producer.transaction():
            for value in range(10):
                await producer.send(topic, b"%d" % value, partition=0)
        # The "dead owner": records 0-3 handled, its offsets pending for 2.5 sessions.
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(4, "")}, loop.group_id)
        running = asyncio.create_task(loop.run())
        await asyncio.sleep(15.0)
        assert loop.seen == [], "nothing is read while the offsets are pending"
        await producer.commit_transaction()
        for _ in range(100):
            if len(loop.seen) >= 6:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(5.0)  # two heartbeats: a member dropped meanwhile would know
        assert loop.seen == list(range(4, 10))
        assert loop.revocations == 0, "the member kept its place in the group"
    finally:
        loop.stop()
        if running is not None:
            await asyncio.wait_for(running, 30)
        await producer.stop()
