"""The audit sink: the audit topic, appended to the audit store, exactly once in effect.

Workers publish one audit record per answer to the audit topic (key: the answer id), in
the same Kafka transaction as the verdict. The sink reads that topic as consumer group
``<app_id>.audit-sink`` (``read_committed``: an aborted batch's records are never
stored) and, per partition, in offset order:

1. appends the batch to the store's hash chain in one database transaction;
2. only then publishes the batch's checkpoints and commits its Kafka offsets.

A crash between 1 and 2 redelivers the batch, and the store skips answer ids it already
holds, so nothing is stored twice and nothing is lost.

Reviewers' labels come the same way: the labels loop publishes each accepted
label to the audit topic (key ``label:<answer_id>:<label_id>``,
:data:`~streamproc.stream.output.catalog.LABEL_KEY_PREFIX`), and the sink hands them to
the store with the records, in offset order, where they join the partition's chain (the
store tells a label from a record by its content and skips label ids it holds). A
tombstone - for an answer's record or a label key, from a purge - has no value and is
never stored. Every
``settings.audit.checkpoint_every`` records of a partition the store also writes a
checkpoint row, and the sink publishes the chain head to the audit topic (key
``checkpoint:<partition>``, a small JSON document): a store whose tail was cut - its
checkpoint rows with it - is still caught by ``audit verify --topic-checkpoints``.

The sink is a :class:`~streamproc.stream.loop.consumer.ConsumerLoop`, like the worker's
loops: the same consumer, rebalance discipline (a batch being stored is finished before
its partitions go), progress watch (``worker_stalled`` when a partition with lag stands
still; :attr:`AuditSink.live`) and bounded close. Its publisher is always the
at-least-once one (checkpoints acknowledged, then offsets committed): the store's dedup
by answer id makes a redelivery harmless, so it needs no Kafka transaction.

The audit topic is compacted *and* time-limited (``cleanup.policy=compact,delete``,
retention = ``settings.audit.retention_days``): one record per answer id, a purge's
tombstones take effect, and nothing outlives the retention the store applies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError

from streamproc.adapters.audit_store import AuditStore, StoredCheckpoint
from streamproc.adapters.kafka_security import aiokafka_options, explain_access_errors
from streamproc.audit.chain import Checkpoint
from streamproc.config import Settings
from streamproc.stream.loop.consumer import ConsumerLoop
from streamproc.stream.loop.publisher import OutboundRecord, PublishFailed
from streamproc.stream.output.catalog import LABEL_KEY_PREFIX

# The topic's spec lives with the others (created at worker start-up); re-exported here
# for the sink's callers. AUDIT_MAX_MESSAGE_BYTES also sizes the sink's fetches.
from streamproc.stream.topics import AUDIT_MAX_MESSAGE_BYTES, audit_topic_spec, ensure_topics

__all__ = [
    "AUDIT_MAX_MESSAGE_BYTES",
    "CHECKPOINT_KEY_PREFIX",
    "AuditSink",
    "SinkStats",
    "audit_sink_group",
    "audit_topic_spec",
    "fetch_topic_checkpoints",
    "label_key",
    "publish_tombstones",
    "run_audit_sink",
]

log = structlog.get_logger(__name__)

CHECKPOINT_KEY_PREFIX: Final = b"checkpoint:"

_NAME: Final = "audit-sink"
"""The sink's loop name: its group is ``<app_id>.audit-sink``."""


def audit_sink_group(settings: Settings) -> str:
    return f"{settings.app_id}.{_NAME}"


@dataclass(slots=True)
class SinkStats:
    """What a sink has done since it started."""

    stored: int = 0
    duplicates: int = 0
    labels: int = 0
    """Reviewers' labels stored."""
    label_duplicates: int = 0
    rejected: int = 0
    checkpoints: int = 0
    batches: int = 0


class AuditSink(ConsumerLoop):
    """Reads the audit topic into an :class:`AuditStore`; see the module docstring.

    ``run`` returns after :meth:`stop`. Store and broker errors propagate (a batch whose
    checkpoints the broker does not take raises ``PublishFailed``): the process exits
    and is restarted, and whatever was not yet committed is read again."""

    def __init__(
        self,
        settings: Settings,
        store: AuditStore,
        *,
        client_options: Mapping[str, Any] | None = None,
        poll_timeout_s: float = 0.5,
        max_records: int = 500,
    ) -> None:
        super().__init__(
            settings,
            name=_NAME,
            topic=settings.audit.topic,
            client_options=(
                aiokafka_options(settings.security) if client_options is None else client_options
            ),
            consumer_options={
                "max_poll_records": max_records,
                "max_partition_fetch_bytes": AUDIT_MAX_MESSAGE_BYTES,
                "fetch_max_bytes": 4 * AUDIT_MAX_MESSAGE_BYTES,
            },
            producer_options={},
            exactly_once=False,
        )
        self._store = store
        self._poll_ms = int(poll_timeout_s * 1000)
        self._max_records = max_records
        self.stats = SinkStats()

    async def run(self) -> None:
        """Run until :meth:`stop`; logs ``audit_sink_stopped`` with the stats however it
        ends."""
        try:
            await super().run()
        finally:
            log.info("audit_sink_stopped", **_stats_fields(self.stats))

    async def _on_started(self) -> None:
        await self._republish_checkpoints()
        log.info("audit_sink_started", topic=self._topic, group=self.group_id)

    async def _step(self) -> None:
        batch = await self._consumer.getmany(
            timeout_ms=self._poll_ms, max_records=self._max_records
        )
        read_at = self._generation  # no await since the read: see ConsumerLoop._admit
        if not batch:
            return
        async with self._lock:
            if not self._admit(batch, read_at):
                return
            for partition in sorted(batch):
                if batch[partition]:
                    await self._sink(partition, batch[partition])

    async def _sink(
        self, partition: TopicPartition, messages: Sequence[ConsumerRecord[bytes, bytes]]
    ) -> None:
        """Store one partition's batch, then publish its checkpoints with its offset."""
        # Records and label entries alike, in offset order; not the sink's own
        # checkpoints, nor a purge's tombstones (an answer's or a label's: no value).
        entries = [
            (int(message.offset), bytes(message.value))
            for message in messages
            if message.value is not None
            and not (message.key or b"").startswith(CHECKPOINT_KEY_PREFIX)
        ]
        checkpoints: list[StoredCheckpoint] = []
        if entries:
            started = time.perf_counter()
            done = await asyncio.to_thread(
                self._store.append,
                partition.partition,
                entries,
                checkpoint_every=self._settings.audit.checkpoint_every,
            )
            checkpoints = done.checkpoints
            self.stats.stored += len(done.stored)
            self.stats.duplicates += len(done.duplicates)
            self.stats.labels += len(done.labels_stored)
            self.stats.label_duplicates += len(done.label_duplicates)
            self.stats.rejected += len(done.rejected)
            for offset, why in done.rejected:
                log.error(
                    "audit_record_rejected", partition=partition.partition, offset=offset, why=why
                )
            log.debug(
                "audit_batch_stored",
                partition=partition.partition,
                stored=len(done.stored),
                duplicates=len(done.duplicates),
                labels=len(done.labels_stored),
                label_duplicates=len(done.label_duplicates),
                store_ms=round((time.perf_counter() - started) * 1000, 1),
            )
        offsets = {partition: int(messages[-1].offset) + 1}
        try:
            await self._publisher.publish(
                [_checkpoint_record(self._topic, mark) for mark in checkpoints], offsets
            )
        except PublishFailed as exc:
            if not isinstance(exc.__cause__, CommitFailedError | IllegalStateError):
                raise
            # The checkpoints went out; the offsets did not: the group moved on without
            # this sink. Whoever owns the partition reads these records again and the
            # store skips them.
            log.warning(
                "audit_commit_failed",
                partition=partition.partition,
                error=type(exc.__cause__).__name__,
            )
        else:
            self.watch.progress.acknowledged(offsets, time.monotonic())
        self.stats.checkpoints += len(checkpoints)
        self.stats.batches += 1

    async def _republish_checkpoints(self) -> None:
        """The latest stored head of every partition, again: a sink that died between
        storing a checkpoint and publishing it leaves none missing on the topic."""
        store = self._store
        latest: list[StoredCheckpoint] = []
        for partition in await asyncio.to_thread(store.partitions):
            marks = await asyncio.to_thread(store.checkpoints, partition)
            if marks:
                latest.append(marks[-1])
        if latest:
            await self._publisher.publish(
                [_checkpoint_record(self._topic, mark) for mark in latest], {}
            )


def _checkpoint_record(topic: str, checkpoint: StoredCheckpoint) -> OutboundRecord:
    return OutboundRecord(
        topic,
        key=CHECKPOINT_KEY_PREFIX + str(checkpoint.partition).encode(),
        value=json.dumps(checkpoint.as_json(), sort_keys=True).encode(),
    )


async def fetch_topic_checkpoints(
    settings: Settings, *, timeout_s: float = 60.0
) -> dict[int, list[Checkpoint]]:
    """Every chain-head checkpoint on the audit topic, by chain partition: the copies
    that survive a store whose tail and checkpoint rows were cut. Reads the topic from
    the beginning to its end (compaction keeps it to one record per answer)."""
    consumer = AIOKafkaConsumer(
        settings.audit.topic,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=AUDIT_MAX_MESSAGE_BYTES,
        **aiokafka_options(settings.security),
    )
    found: dict[int, list[Checkpoint]] = {}
    deadline = time.monotonic() + timeout_s
    async with explain_access_errors(settings.bootstrap_servers, settings.security):
        await consumer.start()
    try:
        while not consumer.assignment() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assigned = list(consumer.assignment())
        ends = await consumer.end_offsets(assigned) if assigned else {}
        while time.monotonic() < deadline:
            positions = {tp: await consumer.position(tp) for tp in assigned}
            if all(positions[tp] >= ends[tp] for tp in assigned):
                break
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                for message in messages:
                    mark = _checkpoint_from(message.key, message.value)
                    if mark is not None:
                        found.setdefault(mark[0], []).append(mark[1])
        else:
            raise TimeoutError(f"could not read {settings.audit.topic} to its end in {timeout_s} s")
    finally:
        await consumer.stop()
    return found


def _checkpoint_from(key: bytes | None, value: bytes | None) -> tuple[int, Checkpoint] | None:
    if key is None or value is None or not key.startswith(CHECKPOINT_KEY_PREFIX):
        return None
    try:
        document = json.loads(value)
        return int(document["partition"]), Checkpoint(
            int(document["seq"]), bytes.fromhex(document["chain_hash"])
        )
    except (ValueError, KeyError, TypeError):
        log.warning("audit_checkpoint_unreadable", key=key.decode("latin-1"))
        return None


def label_key(answer_id: str, label_id: str) -> str:
    """The audit-topic key of a reviewer's label entry."""
    return f"{LABEL_KEY_PREFIX}{answer_id}:{label_id}"


async def publish_tombstones(
    settings: Settings, answer_ids: Sequence[str], label_keys: Sequence[str] = ()
) -> int:
    """Tombstones for these answers' audit records (and for ``label_keys``, their
    labels' entries: :func:`label_key`), so compaction removes their texts - evidence,
    reviewers' notes - from the audit topic too (a purge). Returns how many were sent."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        acks="all",
        **aiokafka_options(settings.security),
    )
    async with explain_access_errors(settings.bootstrap_servers, settings.security):
        await producer.start()
    try:
        for key in [*answer_ids, *label_keys]:
            await producer.send_and_wait(settings.audit.topic, key=key.encode(), value=None)
    finally:
        await producer.stop()
    return len(answer_ids) + len(label_keys)


def run_audit_sink(settings: Settings) -> int:
    """Run the sink until SIGTERM/SIGINT; the exit code. Creates the audit topic if it is
    missing and the store's schema on first use."""
    try:
        return asyncio.run(_serve(settings))
    finally:
        logging.shutdown()


async def _serve(settings: Settings) -> int:
    await ensure_topics(settings.bootstrap_servers, [audit_topic_spec(settings)], settings.security)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with AuditStore(settings.audit.store_url) as store:
        sink = AuditSink(settings, store)
        # A signal while the store was being opened stops the sink as soon as it runs.
        stopping = asyncio.create_task(_stop_on(stop, sink), name="audit-sink-stop")
        try:
            await sink.run()
        except Exception as exc:  # noqa: BLE001 - one line, then a restart by the orchestrator
            log.error("audit_sink_failed", error=f"{type(exc).__name__}: {exc}"[:2000])
            return 1
        finally:
            stopping.cancel()
    return 0


async def _stop_on(stop: asyncio.Event, sink: AuditSink) -> None:
    await stop.wait()
    sink.stop()


def _stats_fields(stats: SinkStats) -> dict[str, int]:
    return {
        "stored": stats.stored,
        "duplicates": stats.duplicates,
        "labels": stats.labels,
        "label_duplicates": stats.label_duplicates,
        "rejected": stats.rejected,
        "checkpoints": stats.checkpoints,
        "batches": stats.batches,
    }
