"""Both brokers the project runs on do what the worker relies on.

Topic creation with a partition count, keyed produce, and a consumer group reading the
records back and committing - on real Kafka and on the embedded Tansu demo broker.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

PARTITIONS = 3
RECORDS = [(f"key-{i % 4}".encode(), f"value-{i}".encode()) for i in range(12)]


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    idempotent: bool  # Tansu lacks idempotent producers


@pytest.fixture(
    params=[("kafka_bootstrap", True), ("tansu_bootstrap", False)], ids=["kafka", "tansu"]
)
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each test below runs once per broker."""
    fixture, idempotent = request.param
    return Broker(bootstrap=request.getfixturevalue(fixture), idempotent=idempotent)


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
        )
        errors = [(name, code) for name, code, *_ in response.topic_errors if code != 0]
        assert not errors, f"create_topics failed: {errors}"
        assert await _partitions_seen(admin, topic) == PARTITIONS
    finally:
        await admin.close()


async def _partitions_seen(admin: AIOKafkaAdminClient, topic: str, wait_s: float = 10.0) -> int:
    """The partition count the broker describes once the new topic has reached its
    metadata: KRaft creates it in the controller first, and a describe sent right after
    can read an empty partition list (seen once in CI)."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        described = await admin.describe_topics([topic])
        partitions = len(described[0]["partitions"])
        if partitions or asyncio.get_running_loop().time() > deadline:
            return partitions
        await asyncio.sleep(0.1)


async def _produce(bootstrap: str, topic: str, idempotent: bool) -> dict[bytes, set[int]]:
    """Send each record on its own (Tansu takes no multi-record batches); key -> partitions."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all"
    )
    await producer.start()
    placed: dict[bytes, set[int]] = {}
    try:
        assert await producer.partitions_for(topic) == set(range(PARTITIONS))
        for key, value in RECORDS:
            meta = await producer.send_and_wait(topic, value=value, key=key)
            placed.setdefault(key, set()).add(meta.partition)
    finally:
        await producer.stop()
    return placed


async def _consume(bootstrap: str, topic: str, group: str) -> list[tuple[bytes, bytes, int]]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen: list[tuple[bytes, bytes, int]] = []
    try:
        async with asyncio.timeout(25):
            while len(seen) < len(RECORDS):
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    seen.extend((r.key, r.value, r.partition) for r in records)
        await consumer.commit()
        committed = 0
        for partition in range(PARTITIONS):
            offset = await consumer.committed(TopicPartition(topic, partition))
            committed += offset or 0
        assert committed == len(RECORDS)
    finally:
        await consumer.stop()
    return seen


async def test_topic_produce_consume_roundtrip(broker: Broker) -> None:
    topic = f"it-brokers-{uuid.uuid4().hex[:10]}"

    await _create_topic(broker.bootstrap, topic)
    placed = await _produce(broker.bootstrap, topic, broker.idempotent)
    seen = await _consume(broker.bootstrap, topic, group=f"it-group-{uuid.uuid4().hex[:10]}")

    assert sorted((k, v) for k, v, _ in seen) == sorted(RECORDS)
    assert all(len(parts) == 1 for parts in placed.values()), "a key spans partitions"
    assert {(k, p) for k, _, p in seen} == {(k, p) for k, ps in placed.items() for p in ps}
