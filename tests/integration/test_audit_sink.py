"""The audit sink on a real Kafka broker: records published to the audit topic end up
in the store once each, in offset order, across a crash between store and offsets, a
kill -9 and a restart; its checkpoints on the topic catch a store whose tail was cut;
reviewers' label entries on the topic join the chains with the records."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from streamproc.audit import AuditRecord
from streamproc.audit.sink import (
    AuditSink,
    audit_checkpoint_topic_spec,
    audit_topic_spec,
    fetch_topic_checkpoints,
    label_key,
    publish_tombstones,
)
from streamproc.audit.store import AuditQuery, AuditStore, StoredPurge, StoredRecord
from streamproc.cli.main import main
from streamproc.config import Settings
from streamproc.kafka.topics import ensure_topics
from streamproc.wiring import kafka_connection, kafka_loop_options, topic_layout
from tests.unit.audit.audit_samples import make_records
from tests.unit.audit.label_samples import label_bytes, make_label
from tests.unit.audit.store_contract import sql

Placed = dict[str, tuple[int, int]]
"""answer id -> (partition, offset) on the audit topic."""


@pytest.fixture()
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    run = uuid.uuid4().hex[:8]
    return Settings(
        app_id=f"audit-{run}",
        broker_url=f"kafka://{kafka_bootstrap}",
        topics={"partitions": 2},
        worker={"session_timeout_s": 6.0, "rebalance_timeout_s": 10.0},
        audit={
            "topic": f"audit-{run}.audit",
            "store_url": f"sqlite:///{tmp_path / 'audit.db'}",
            "checkpoint_every": 5,
        },
    )


@pytest.fixture()
def store(settings: Settings) -> Iterator[AuditStore]:
    with AuditStore(settings.audit.store_url) as store:
        yield store


async def publish(settings: Settings, records: list[AuditRecord], *, abort: bool = False) -> Placed:
    """Publish as the judge loop does: keyed by answer id, in a transaction."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        transactional_id=f"{settings.app_id}-test-{uuid.uuid4().hex[:6]}",
        enable_idempotence=True,
    )
    await producer.start()
    placed: Placed = {}
    try:
        await producer.begin_transaction()
        for record in records:
            sent = await producer.send_and_wait(
                settings.audit.topic,
                key=record.answer_id.encode(),
                value=record.model_dump_json().encode(),
            )
            placed[record.answer_id] = (sent.partition, sent.offset)
        if abort:
            await producer.abort_transaction()
        else:
            await producer.commit_transaction()
    finally:
        await producer.stop()
    return placed


async def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def assert_chains_follow_offsets(store: AuditStore, placed: Placed) -> None:
    """Each answer once, on the partition it was published to, seqs 1..n in offset order."""
    stored = list(store.export())
    assert sorted(s.summary.answer_id for s in stored) == sorted(placed)
    for partition in {p for p, _ in placed.values()}:
        chain = [s.summary for s in stored if s.summary.partition == partition]
        assert [s.seq for s in chain] == list(range(1, len(chain) + 1))
        assert [s.offset for s in chain] == sorted(s.offset for s in chain)
        assert all(placed[s.answer_id] == (partition, s.offset) for s in chain)
    report = store.verify()
    assert report.ok, report.describe()


async def test_a_crash_between_store_and_offsets_stores_nothing_twice(
    settings: Settings, store: AuditStore
) -> None:
    await ensure_topics(
        settings.bootstrap_servers,
        [
            audit_topic_spec(topic_layout(settings)),
            audit_checkpoint_topic_spec(topic_layout(settings)),
        ],
        settings.security,
    )
    records = make_records(24)
    placed = await publish(settings, records)
    await publish(settings, make_records(2, start=100), abort=True)  # never committed
    # A purge's tombstone: not a record.
    await publish_tombstones(kafka_connection(settings), settings.audit.topic, ["ans-3"])
    # A sink stored partition 0's first records, then died before committing offsets.
    early = sorted(
        (offset, record)
        for record in records
        for partition, offset in [placed[record.answer_id]]
        if partition == 0
    )[:5]
    assert store.append(0, early, checkpoint_every=5).stored

    sink = await run_sink_until(settings, store, 24)
    assert (sink.stats.stored, sink.stats.duplicates, sink.stats.rejected) == (19, 5, 0)
    assert store.get("ans-100") is None, "an aborted transaction's record is not stored"
    assert_chains_follow_offsets(store, placed)

    # The chain heads are on the topic too, and catch a store whose tail was cut.
    on_topic = await fetch_topic_checkpoints(
        kafka_connection(settings), settings.audit.checkpoint_topic, timeout_s=30
    )
    for partition in (0, 1):
        stored_marks = [(c.seq, c.chain_hash) for c in store.checkpoints(partition)]
        assert stored_marks, f"partition {partition} has checkpoints"
        assert [(c.mark.seq, c.mark.chain_hash.hex()) for c in on_topic[partition]] == stored_marks
    last = store.checkpoints(0)[-1].seq
    sql(store, "DELETE FROM audit_records WHERE audit_partition = 0 AND seq >= :s", s=last - 1)
    sql(store, "DELETE FROM audit_checkpoints WHERE audit_partition = 0 AND seq >= :s", s=last - 1)
    assert store.verify().ok, "the store alone no longer shows the cut"
    broken = store.verify(extra_checkpoints=on_topic).first_problem
    assert broken is not None and broken.problem is not None
    assert (broken.partition, broken.problem.problem, broken.problem.seq) == (0, "truncated", last)


async def run_sink_until(settings: Settings, store: AuditStore, count: int) -> AuditSink:
    """An in-process sink, stopped once the store holds ``count`` records."""
    sink = AuditSink(kafka_loop_options(settings), settings.audit, store, poll_timeout_s=0.2)
    task = asyncio.create_task(sink.run())
    try:
        await wait_until(lambda: len(store.find(limit=None)) >= count, 60, f"{count} records")
        await asyncio.sleep(1.0)  # anything more would show up by now
    finally:
        sink.stop()
        await asyncio.wait_for(task, 30)
    return sink


async def test_audit_verify_checks_the_topic_checkpoints_from_the_cli(
    settings: Settings,
    store: AuditStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in settings.to_env().items():
        monkeypatch.setenv(key, value)
    await ensure_topics(
        settings.bootstrap_servers,
        [
            audit_topic_spec(topic_layout(settings)),
            audit_checkpoint_topic_spec(topic_layout(settings)),
        ],
        settings.security,
    )
    await publish(settings, make_records(24))
    await run_sink_until(settings, store, 24)
    assert await asyncio.to_thread(main, ["audit", "verify", "--topic-checkpoints"]) == 0
    assert store.checkpoints(1), "partition 1 was checkpointed"
    sql(store, "DELETE FROM audit_records WHERE audit_partition = 1 AND seq >= 2")
    sql(store, "DELETE FROM audit_checkpoints WHERE audit_partition = 1")
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "verify"]) == 0
    assert await asyncio.to_thread(main, ["audit", "verify", "--topic-checkpoints"]) == 1
    assert "partition 1, seq 5" in capsys.readouterr().err


def _sink_process(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "streamproc", "audit-sink"],
        env={**os.environ, **settings.to_env()},
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def test_a_killed_sink_restarts_without_duplicates(
    settings: Settings, store: AuditStore, tmp_path: Path
) -> None:
    await ensure_topics(
        settings.bootstrap_servers,
        [
            audit_topic_spec(topic_layout(settings)),
            audit_checkpoint_topic_spec(topic_layout(settings)),
        ],
        settings.security,
    )
    log = tmp_path / "sink.log"
    first = make_records(60)
    second = make_records(60, start=60)
    placed = await publish(settings, first)
    process = _sink_process(settings, log)
    try:
        # kill -9 as soon as records show up: likely before it committed its offsets
        await wait_until(lambda: len(store.find(limit=None)) > 0, 60, "the first stored record")
    finally:
        process.kill()
        process.wait(10)
    killed_after = len(store.find(limit=None))
    placed |= await publish(settings, second)
    process = _sink_process(settings, log)
    try:
        await wait_until(lambda: len(store.find(limit=None)) >= 120, 60, "all 120 records")
        await asyncio.sleep(1.0)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
    assert code == 0, log.read_text()[-3000:]
    assert killed_after > 0
    assert_chains_follow_offsets(store, placed)
    assert "audit_sink_stopped" in log.read_text()


async def test_label_entries_on_the_audit_topic_join_the_chain(
    settings: Settings, store: AuditStore
) -> None:
    await ensure_topics(
        settings.bootstrap_servers,
        [
            audit_topic_spec(topic_layout(settings)),
            audit_checkpoint_topic_spec(topic_layout(settings)),
        ],
        settings.security,
    )
    records = make_records(8)
    placed = await publish(settings, records)
    labels = [
        make_label(records[0], "L0"),
        make_label(records[2], "L2"),
        make_label(
            records[2], "L2-bob", reviewer="bob", answer_label="hallucinated", hours_later=2
        ),
        make_label(records[5], "L5"),
    ]
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    label_places: Placed = {}
    try:
        for entry in labels:  # as the labels loop publishes them
            sent = await producer.send_and_wait(
                settings.audit.topic,
                key=label_key(entry.answer_id, entry.label.label_id).encode(),
                value=label_bytes(entry),
            )
            label_places[entry.label.label_id] = (sent.partition, sent.offset)
    finally:
        await producer.stop()
    await publish_tombstones(
        kafka_connection(settings), settings.audit.topic, [], [label_key("ans-0", "L-gone")]
    )  # a purged label

    sink = AuditSink(kafka_loop_options(settings), settings.audit, store, poll_timeout_s=0.2)
    task = asyncio.create_task(sink.run())
    try:
        await wait_until(
            lambda: sink.stats.stored + sink.stats.labels >= len(records) + len(labels),
            60,
            "every record and label",
        )
    finally:
        sink.stop()
        await asyncio.wait_for(task, 30)
    assert (sink.stats.rejected, sink.stats.duplicates, sink.stats.label_duplicates) == (0, 0, 0)

    stored = {label.label_id: label for r in records for label in store.labels_for(r.answer_id)}
    assert sorted(stored) == sorted(label_places)
    for label_id, (partition, offset) in label_places.items():
        assert (stored[label_id].partition, stored[label_id].offset) == (partition, offset)
    assert [s.reviewer for s in store.labels_for("ans-2")] == ["alice", "bob"]
    for partition in (0, 1):
        chain = list(store.export_entries(AuditQuery(partition=partition)))
        places = [
            (e.summary.seq, e.summary.offset) if isinstance(e, StoredRecord) else (e.seq, e.offset)
            for e in chain
            if not isinstance(e, StoredPurge)
        ]
        assert [seq for seq, _ in places] == list(range(1, len(chain) + 1))
        assert [offset for _, offset in places] == sorted(offset for _, offset in places)
    report = store.verify()
    assert report.ok, report.describe()
    assert sum(c.labels for c in report.partitions) == len(labels)
    assert sum(c.records for c in report.partitions) == len(placed)
