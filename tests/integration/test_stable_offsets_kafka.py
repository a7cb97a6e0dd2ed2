"""Stable committed offsets on real Kafka 4.1.1: pending transactional offsets are waited
for, never read as the older committed ones (what aiokafka's own offset fetch returns)."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamproc.kafka.stable_offsets import stable_committed


async def test_pending_offsets_are_waited_for_until_their_transaction_commits(
    kafka_bootstrap: str,
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"stable-{run}", f"stable-{run}.group"
    tp = TopicPartition(topic, 0)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
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
