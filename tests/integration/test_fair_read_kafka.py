"""FairReader on a real broker: a backlog on three partitions is read in time order.

Before it, one ``getmany`` drained the first partition's whole fetch (hundreds of records)
before the next partition's first record; replayed answers then reached the windows a
partition at a time, and a spike was decided on a third of its answers. Here the three
partitions hold an answer every 1, 2 and 3 seconds of record time.
"""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streamproc.kafka.fair_read import FairReader

PER_PARTITION = 400
BATCH = 30
STEP_MS = (1000, 2000, 3000)


async def test_a_backlog_is_read_in_step_with_its_record_times(
    kafka_bootstrap: str,
) -> None:
    topic = f"fair-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=50)
    await producer.start()
    try:
        start_ms = 1_700_000_000_000
        for i in range(PER_PARTITION):
            for partition, step in enumerate(STEP_MS):
                await producer.send(
                    topic,
                    f"{partition}:{i}".encode(),
                    partition=partition,
                    timestamp_ms=start_ms + i * step,
                )
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    reader = FairReader()
    spreads: list[int] = []
    seen: set[bytes] = set()
    await consumer.start()
    try:
        while len(seen) < 3 * PER_PARTITION:
            batch, _ = await reader.read(
                consumer, timeout_ms=2000, max_records=BATCH, generation=lambda: 0
            )
            assert batch, f"nothing read after {len(seen)} records"
            if len(batch) == 3:
                lasts = [records[-1].timestamp for records in batch.values()]
                spreads.append(max(lasts) - min(lasts))
            for records in batch.values():
                offsets = [r.offset for r in records]
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
                seen.update(r.value or b"" for r in records)
    finally:
        await consumer.stop()

    assert len(seen) == 3 * PER_PARTITION  # nothing skipped, nothing twice
    # While all three have records, a batch ends them within a few records' steps of each
    # other (the median batch); equal shares drifted them apart by minutes.
    assert len(spreads) >= 20, spreads
    assert sorted(spreads)[len(spreads) // 2] <= 3 * STEP_MS[-1], spreads
