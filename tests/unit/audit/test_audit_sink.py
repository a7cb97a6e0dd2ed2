"""The audit sink as a consumer loop, without a broker: each partition's batch is in the
store before its checkpoints are published and its offsets committed, through the loop's
at-least-once publisher; a batch the store refuses commits nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.errors import CommitFailedError
from aiokafka.structs import TopicPartition

from streamproc.audit.sink import (
    AUDIT_MAX_MESSAGE_BYTES,
    CHECKPOINT_KEY_PREFIX,
    AuditSink,
    audit_sink_group,
    label_key,
)
from streamproc.audit.store import AuditStore
from streamproc.config import Settings
from streamproc.kafka.consumer import _Rebalance
from streamproc.kafka.publisher import AtLeastOncePublisher, PublishFailed
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import kafka_loop_options, topic_names
from tests.unit.audit.audit_samples import make_records
from tests.unit.audit.keys import CHECKER, SIGNER
from tests.unit.audit.label_samples import label_bytes, make_label

TOPIC = "app.audit"
P0 = TopicPartition(TOPIC, 0)
P1 = TopicPartition(TOPIC, 1)

_Batch = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]


class _Consumer:
    """Hands out prepared batches, one per getmany; records where positions are sought."""

    def __init__(self, *batches: _Batch) -> None:
        self.batches = list(batches)
        self.sought: dict[TopicPartition, int] = {}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.sought[tp] = offset

    async def getmany(self, *partitions: TopicPartition, **_: Any) -> _Batch:
        return self.batches.pop(0) if self.batches else {}


class _Publisher:
    """Records what is published, and how many records the store held at that moment."""

    def __init__(self, store: AuditStore, fail: BaseException | None = None) -> None:
        self.store = store
        self.fail = fail
        self.published: list[tuple[list[OutboundRecord], dict[TopicPartition, int], int]] = []

    async def publish(
        self, records: Sequence[OutboundRecord], offsets: Mapping[TopicPartition, int]
    ) -> None:
        self.published.append((list(records), dict(offsets), len(self.store.find(limit=None))))
        if self.fail is not None:
            raise PublishFailed("batch not acknowledged") from self.fail


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(
        app_id="app",
        audit={
            "topic": TOPIC,
            "store_url": f"sqlite:///{tmp_path / 'audit.db'}",
            "checkpoint_every": 5,
        },
    )


@pytest.fixture()
def store(settings: Settings) -> Iterator[AuditStore]:
    with AuditStore(settings.audit.store_url) as store:
        yield store


def _record(tp: TopicPartition, offset: int, key: bytes | None, value: bytes | None) -> Any:
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, key, value, None, 0, 0, [])


def _audit_batch(tp: TopicPartition, first: int, start: int, count: int) -> list[Any]:
    return [
        _record(tp, first + i, r.answer_id.encode(), r.model_dump_json().encode())
        for i, r in enumerate(make_records(count, start=start))
    ]


async def _sink(settings: Settings, store: AuditStore, *batches: _Batch) -> AuditSink:
    sink = AuditSink(kafka_loop_options(settings), settings.audit, store, client_options={})
    sink._consumer = _Consumer(*batches)
    await _Rebalance(sink).on_partitions_assigned([P0, P1])
    return sink


def test_the_sink_is_an_at_least_once_consumer_loop_of_its_own_group(
    settings: Settings, store: AuditStore
) -> None:
    sink = AuditSink(kafka_loop_options(settings), settings.audit, store)
    assert sink.group_id == audit_sink_group(topic_names(settings)) == "app.audit-sink"
    assert settings.worker.exactly_once and settings.broker_flavour == "kafka"
    assert not sink.transactional, "the store dedups: no Kafka transaction needed"


async def test_the_consumer_reads_committed_records_in_audit_sized_fetches(
    settings: Settings, store: AuditStore
) -> None:
    consumer, publisher = AuditSink(
        kafka_loop_options(settings), settings.audit, store, max_records=77
    )._connect()
    assert isinstance(publisher, AtLeastOncePublisher)
    assert consumer._isolation_level == "read_committed"
    assert consumer._auto_offset_reset == "earliest"
    assert consumer._max_partition_fetch_bytes == AUDIT_MAX_MESSAGE_BYTES
    assert consumer._fetch_max_bytes == 4 * AUDIT_MAX_MESSAGE_BYTES
    assert not consumer._enable_auto_commit
    assert consumer._group_id == "app.audit-sink"


async def test_a_batch_is_stored_then_its_checkpoints_and_offsets_are_published(
    settings: Settings, store: AuditStore
) -> None:
    p0 = [
        *_audit_batch(P0, 10, 0, 6),
        _record(P0, 16, b"ans-99", None),  # a purge's tombstone
        _record(P0, 17, CHECKPOINT_KEY_PREFIX + b"0", b"{}"),  # the sink's own checkpoint
    ]
    sink = await _sink(settings, store, {P1: _audit_batch(P1, 3, 6, 2), P0: p0})
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]
    await sink._step()

    (records0, offsets0, held0), (records1, offsets1, held1) = publisher.published
    assert (offsets0, held0) == ({P0: 18}, 6), "partition 0 stored before its offset went"
    assert (offsets1, held1) == ({P1: 5}, 8)
    assert records1 == []
    (mark,) = records0
    assert (mark.topic, mark.key) == (settings.audit.checkpoint_topic, CHECKPOINT_KEY_PREFIX + b"0")
    document = json.loads(mark.value or b"")
    stored = store.checkpoints(0)[-1]
    assert (document["partition"], document["seq"]) == (0, 5) == (0, stored.seq)
    assert document["chain_hash"] == stored.chain_hash
    stats = sink.stats
    assert (stats.stored, stats.duplicates, stats.rejected) == (8, 0, 0)
    assert (stats.checkpoints, stats.batches) == (1, 2)
    assert sink.watch.progress.partitions[P0].acknowledged == 18
    assert sink.watch.progress.partitions[P1].acknowledged == 5


async def test_a_redelivered_batch_is_skipped_by_the_store_and_committed_again(
    settings: Settings, store: AuditStore
) -> None:
    batch = {P0: _audit_batch(P0, 0, 0, 3)}
    sink = await _sink(settings, store, batch, batch)
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]
    await sink._step()
    await sink._step()
    assert [offsets for _, offsets, _ in publisher.published] == [{P0: 3}, {P0: 3}]
    assert (sink.stats.stored, sink.stats.duplicates) == (3, 3)


async def test_a_batch_the_store_refuses_commits_no_offset(
    settings: Settings, store: AuditStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = await _sink(settings, store, {P0: _audit_batch(P0, 0, 0, 3)})
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]

    def broken(*_: object, **__: object) -> None:
        raise OSError("database is gone")

    monkeypatch.setattr(store, "append", broken)
    with pytest.raises(OSError, match="database is gone"):
        await sink._step()
    assert publisher.published == []
    assert not sink._lock.locked()


async def test_an_offset_commit_the_group_refuses_is_ridden_out(
    settings: Settings, store: AuditStore
) -> None:
    sink = await _sink(settings, store, {P0: _audit_batch(P0, 0, 0, 3)})
    sink._publisher = _Publisher(store, CommitFailedError("rebalanced"))  # type: ignore[assignment]
    await sink._step()  # the next owner reads the batch again; the store skips it
    assert (sink.stats.stored, sink.stats.batches) == (3, 1)
    assert sink.watch.progress.partitions[P0].acknowledged is None


async def test_checkpoints_the_broker_does_not_take_stop_the_sink(
    settings: Settings, store: AuditStore
) -> None:
    sink = await _sink(settings, store, {P0: _audit_batch(P0, 0, 0, 3)})
    sink._publisher = _Publisher(store, TimeoutError())  # type: ignore[assignment]
    with pytest.raises(PublishFailed):
        await sink._step()


async def test_a_batch_read_during_a_rebalance_is_put_back_not_stored(
    settings: Settings, store: AuditStore
) -> None:
    sink = await _sink(settings, store)
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]

    class _RevokedWhileReading(_Consumer):
        async def getmany(self, *partitions: TopicPartition, **_: Any) -> _Batch:
            await _Rebalance(sink).on_partitions_revoked([P0, P1])
            return {P0: _audit_batch(P0, 40, 0, 3)}

    sink._consumer = consumer = _RevokedWhileReading()
    await sink._step()
    assert publisher.published == []
    assert store.find(limit=None) == []
    assert consumer.sought == {P0: 40}, "read again once the assignment is prepared"


async def test_the_latest_stored_heads_are_published_again_at_start(
    settings: Settings, store: AuditStore
) -> None:
    store.append(
        1,
        [(i, r.model_dump_json().encode()) for i, r in enumerate(make_records(7))],
        checkpoint_every=3,
    )
    sink = await _sink(settings, store)
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]
    await sink._on_started()
    ((records, offsets, _),) = publisher.published
    assert offsets == {}
    assert [(r.key, json.loads(r.value or b"")["seq"]) for r in records] == [
        (CHECKPOINT_KEY_PREFIX + b"1", 6)
    ]


async def test_label_entries_join_their_partitions_chain_in_offset_order(
    settings: Settings, store: AuditStore
) -> None:
    records = make_records(3)
    labels = [make_label(records[2], "L1"), make_label(records[0], "L2", reviewer="bob")]
    p0 = [
        _record(P0, 0, b"ans-0", records[0].model_dump_json().encode()),
        _record(P0, 1, label_key("ans-2", "L1").encode(), label_bytes(labels[0])),
        _record(P0, 2, b"ans-1", records[1].model_dump_json().encode()),
        _record(P0, 3, label_key("ans-9", "L9").encode(), None),  # a purged label's tombstone
        _record(P0, 4, label_key("ans-0", "L2").encode(), label_bytes(labels[1])),
        _record(P0, 5, b"ans-2", records[2].model_dump_json().encode()),
    ]
    batch = {P0: p0}
    sink = await _sink(settings, store, batch, batch)
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]
    await sink._step()
    await sink._step()  # redelivered: nothing changes

    assert [offsets for _, offsets, _ in publisher.published] == [{P0: 6}, {P0: 6}]
    stats = sink.stats
    assert (stats.stored, stats.labels, stats.rejected) == (3, 2, 0)
    assert (stats.duplicates, stats.label_duplicates) == (3, 2)
    [l1] = store.labels_for("ans-2")
    [l2] = store.labels_for("ans-0")
    assert (l1.seq, l1.offset, l2.seq, l2.offset) == (2, 1, 4, 4)
    ans_2 = store.get("ans-2")
    assert ans_2 is not None and (ans_2.summary.seq, ans_2.prev_hash) == (5, l2.chain_hash)
    (mark,) = publisher.published[0][0]
    assert json.loads(mark.value or b"")["seq"] == 5, "label seqs count towards checkpoints"
    report = store.verify()
    assert report.ok and report.partitions[0].labels == 2, report.describe()


async def test_a_quiet_partition_is_anchored_by_a_signed_checkpoint_within_the_interval(
    settings: Settings, store: AuditStore
) -> None:
    audit = settings.audit.model_copy(update={"checkpoint_interval_s": 0.05})
    settings = settings.model_copy(update={"audit": audit})
    sink = AuditSink(
        kafka_loop_options(settings), settings.audit, store, client_options={}, signer=SIGNER
    )
    sink._consumer = _Consumer({P0: _audit_batch(P0, 0, 0, 3)})
    await _Rebalance(sink).on_partitions_assigned([P0, P1])
    sink._publisher = publisher = _Publisher(store)  # type: ignore[assignment]
    await sink._step()
    assert [records for records, _, _ in publisher.published] == [[]], "3 < checkpoint_every"
    await asyncio.sleep(0.06)
    await sink._step()  # nothing read: the interval alone makes the checkpoint
    (mark,) = publisher.published[-1][0]
    document = json.loads(mark.value or b"")
    assert (mark.topic, document["seq"]) == (settings.audit.checkpoint_topic, 3)
    assert CHECKER.valid(document), "signed with the sink's key"
    report = store.verify(checker=CHECKER)
    assert report.ok and report.partitions[0].anchored_seq == 3
    await asyncio.sleep(0.06)
    await sink._step()
    assert len(publisher.published) == 2, "nothing new: no second checkpoint"
