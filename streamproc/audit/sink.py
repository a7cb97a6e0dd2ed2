"""The audit sink: the audit topic, appended to the audit store, exactly once in effect.

Workers publish one audit record per answer to the audit topic (key: ``tenant/answer_id``), in
the same Kafka transaction as the verdict. The sink reads that topic as consumer group
``<app_id>.audit-sink`` (``read_committed``: an aborted batch's records are never
stored) and, per partition, in offset order:

1. appends the batch to the store's hash chain in one database transaction;
2. only then publishes the batch's checkpoints and commits its Kafka offsets.

A crash between 1 and 2 redelivers the batch, and the store skips answer ids it already
holds, so nothing is stored twice and nothing is lost.

Reviewers' labels come the same way: the labels loop publishes each accepted
label to the audit topic (key ``label:<answer_id>:<label_id>``,
:data:`~streamproc.verdicts.catalog.LABEL_KEY_PREFIX`), and the sink hands them to
the store with the records, in offset order, where they join the partition's chain (the
store tells a label from a record by its content and skips label ids it holds). A
tombstone - for an answer's record or a label key, from a purge - has no value and is
never stored. Every
``audit.checkpoint_every`` links of a partition, and at most
``checkpoint_interval_s`` after a partition's newest link, the store writes a
checkpoint row signed with ``audit.signing_key_file`` (Ed25519), and the sink
publishes it to the checkpoint topic (``audit.checkpoint_topic``, key
``checkpoint:<partition>``, the signed JSON document), apart from the store: a store
whose tail was cut - its checkpoint rows with it - or whose chain was recomputed is
still caught by ``audit verify --topic-checkpoints``.

The sink is a :class:`~streamproc.kafka.consumer.ConsumerLoop`, like the worker's
loops: the same consumer, rebalance discipline (a batch being stored is finished before
its partitions go), progress watch (``worker_stalled`` when a partition with lag stands
still; :attr:`AuditSink.live`) and bounded close. Its publisher is always the
at-least-once one (checkpoints acknowledged, then offsets committed): the store's dedup
by answer id makes a redelivery harmless, so it needs no Kafka transaction.

The audit topic is compacted *and* time-limited (``cleanup.policy=compact,delete``,
retention = ``audit.retention_days``): one record per answer id, a purge's
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

from streamproc.audit.anchors import TopicCheckpoint, parse_checkpoint
from streamproc.audit.options import AuditSettings
from streamproc.audit.signing import KeyFileError, Signer
from streamproc.audit.store import AuditStore, StoredCheckpoint
from streamproc.contracts.topic_names import TopicNames
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.publisher import PublishFailed
from streamproc.kafka.security import (
    EXIT_BROKER_UNREACHABLE,
    BrokerUnreachable,
    aiokafka_options,
    explain_access_errors,
)

# The topic's spec lives with the others (created at worker start-up); re-exported here
# for the sink's callers. AUDIT_MAX_MESSAGE_BYTES also sizes the sink's fetches.
from streamproc.kafka.topics import (
    AUDIT_MAX_MESSAGE_BYTES,
    TopicLayout,
    audit_checkpoint_topic_spec,
    audit_topic_spec,
    await_topics,
)
from streamproc.telemetry.logging import START_UP_SETTLE_S, start_up_done
from streamproc.verdicts.catalog import LABEL_KEY_PREFIX
from streamproc.verdicts.record import OutboundRecord

__all__ = [
    "AUDIT_MAX_MESSAGE_BYTES",
    "CHECKPOINT_KEY_PREFIX",
    "AuditSink",
    "SinkStats",
    "audit_checkpoint_topic_spec",
    "audit_sink_group",
    "audit_topic_spec",
    "fetch_topic_checkpoints",
    "label_key",
    "load_signer",
    "publish_checkpoints",
    "publish_tombstones",
    "run_audit_sink",
]

log = structlog.get_logger(__name__)

CHECKPOINT_KEY_PREFIX: Final = b"checkpoint:"

_NAME: Final = "audit-sink"
"""The sink's loop name: its group is ``<app_id>.audit-sink``."""


def audit_sink_group(names: TopicNames) -> str:
    return names.group(_NAME)


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
        kafka: KafkaLoopOptions,
        audit: AuditSettings,
        store: AuditStore,
        *,
        client_options: Mapping[str, Any] | None = None,
        poll_timeout_s: float = 0.5,
        max_records: int = 500,
        signer: Signer | None = None,
    ) -> None:
        """``kafka.names``: the audit topic read and the checkpoint topic; ``audit``: how
        often checkpoints are made."""
        self._audit = audit
        super().__init__(
            kafka,
            name=_NAME,
            topic=kafka.names.audit,
            client_options=(
                aiokafka_options(kafka.connection.security)
                if client_options is None
                else client_options
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
        self._signer = signer
        self._checkpoint_topic = kafka.names.audit_checkpoints
        self._unanchored_since: dict[int, float] = {}
        """Partitions with links after their last checkpoint, since when (monotonic)."""
        self._published: dict[int, int] = {}
        """The highest checkpoint seq published, per partition."""
        self._swept_at = time.monotonic()
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
        if self._signer is None:
            log.warning(
                "audit_checkpoints_unsigned",
                why="no audit.signing_key_file: checkpoints anchor nothing",
            )
        log.info("audit_sink_started", topic=self._topic, group=self.group_id)

    async def _step(self) -> None:
        batch = await self._consumer.getmany(
            timeout_ms=self._poll_ms, max_records=self._max_records
        )
        read_at = self._read_epoch  # no await since the read: see ConsumerLoop._admit
        async with self._lock:
            if batch and self._admit(batch, read_at):
                for partition in sorted(batch):
                    if batch[partition]:
                        await self._sink(partition, batch[partition])
            await self._checkpoint_due()

    async def _checkpoint_due(self) -> None:
        """A checkpoint of each partition whose newest links have waited
        ``checkpoint_interval_s`` for one, published at once: a quiet chain is anchored
        within that time, not only every ``checkpoint_every`` links."""
        now = time.monotonic()
        interval = self._audit.checkpoint_interval_s
        for partition, since in sorted(self._unanchored_since.items()):
            if now - since < interval:
                continue
            mark = await asyncio.to_thread(self._store.checkpoint, partition, signer=self._signer)
            if mark is not None:
                await self._publish_marks([mark])
                self.stats.checkpoints += 1
            self._unanchored_since.pop(partition, None)
        if now - self._swept_at >= interval:
            # Checkpoints made outside the sink (a purge's) reach the topic too.
            self._swept_at = now
            latest = await asyncio.to_thread(self._store.latest_checkpoints)
            await self._publish_marks(
                [mark for mark in latest if mark.seq > self._published.get(mark.partition, 0)]
            )

    async def _publish_marks(self, marks: Sequence[StoredCheckpoint]) -> None:
        if marks:
            await self._publisher.publish([self._checkpoint_record(mark) for mark in marks], {})
            self._note_published(marks)

    def _note_published(self, marks: Sequence[StoredCheckpoint]) -> None:
        for mark in marks:
            if mark.seq > self._published.get(mark.partition, 0):
                self._published[mark.partition] = mark.seq

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
                checkpoint_every=self._audit.checkpoint_every,
                signer=self._signer,
            )
            checkpoints = done.checkpoints
            if checkpoints and checkpoints[-1].seq == done.head:
                self._unanchored_since.pop(partition.partition, None)
            elif done.head:
                self._unanchored_since.setdefault(partition.partition, time.monotonic())
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
                [self._checkpoint_record(mark) for mark in checkpoints], offsets
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
        self._note_published(checkpoints)
        self.stats.checkpoints += len(checkpoints)
        self.stats.batches += 1

    async def _republish_checkpoints(self) -> None:
        """The latest stored head of every partition, again: a sink that died between
        storing a checkpoint and publishing it leaves none missing on the topic."""
        await self._publish_marks(await asyncio.to_thread(self._store.latest_checkpoints))

    def _checkpoint_record(self, checkpoint: StoredCheckpoint) -> OutboundRecord:
        """A checkpoint for the checkpoint topic: the signed document, as stored."""
        return OutboundRecord(
            self._checkpoint_topic,
            key=CHECKPOINT_KEY_PREFIX + str(checkpoint.partition).encode(),
            value=json.dumps(checkpoint.as_json(), sort_keys=True).encode(),
        )


async def fetch_topic_checkpoints(
    connection: KafkaConnection, topic: str, *, timeout_s: float = 60.0
) -> dict[int, list[TopicCheckpoint]]:
    """Every chain-head checkpoint on the checkpoint topic, by chain partition, as
    published (signed): the copies that survive a store whose tail and checkpoint rows
    were cut. Reads the topic (``audit.checkpoint_topic``) from the beginning to its end."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=connection.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=AUDIT_MAX_MESSAGE_BYTES,
        **aiokafka_options(connection.security),
    )
    found: dict[int, list[TopicCheckpoint]] = {}
    deadline = time.monotonic() + timeout_s
    async with explain_access_errors(connection.bootstrap_servers, connection.security):
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
                        found.setdefault(mark.partition, []).append(mark)
        else:
            raise TimeoutError(f"could not read {topic} to its end in {timeout_s} s")
    finally:
        await consumer.stop()
    return found


def _checkpoint_from(key: bytes | None, value: bytes | None) -> TopicCheckpoint | None:
    if key is None or value is None or not key.startswith(CHECKPOINT_KEY_PREFIX):
        return None
    try:
        mark = parse_checkpoint(json.loads(value))
    except ValueError:
        mark = None
    if mark is None:
        log.warning("audit_checkpoint_unreadable", key=key.decode("latin-1")[:200])
    return mark


async def publish_checkpoints(
    connection: KafkaConnection, topic: str, marks: Sequence[StoredCheckpoint]
) -> int:
    """Publish checkpoints (those a purge made) to the checkpoint topic ``topic``
    (``audit.checkpoint_topic``); how many."""
    producer = AIOKafkaProducer(
        bootstrap_servers=connection.bootstrap_servers,
        acks="all",
        **aiokafka_options(connection.security),
    )
    async with explain_access_errors(connection.bootstrap_servers, connection.security):
        await producer.start()
    try:
        for mark in marks:
            await producer.send_and_wait(
                topic,
                key=CHECKPOINT_KEY_PREFIX + str(mark.partition).encode(),
                value=json.dumps(mark.as_json(), sort_keys=True).encode(),
            )
    finally:
        await producer.stop()
    return len(marks)


def label_key(answer_id: str, label_id: str) -> str:
    """The audit-topic key of a reviewer's label entry."""
    return f"{LABEL_KEY_PREFIX}{answer_id}:{label_id}"


async def publish_tombstones(
    connection: KafkaConnection,
    topic: str,
    record_keys: Sequence[str],
    label_keys: Sequence[str] = (),
) -> int:
    """Tombstones on the audit topic ``topic`` (``audit.topic``) for these answers' audit
    records (``record_keys``:
    :func:`~streamproc.verdicts.catalog.audit_record_key`; and for ``label_keys``, their
    labels' entries: :func:`label_key`), so compaction removes their texts - evidence,
    reviewers' notes - from the audit topic too (a purge). Returns how many were sent."""
    producer = AIOKafkaProducer(
        bootstrap_servers=connection.bootstrap_servers,
        acks="all",
        **aiokafka_options(connection.security),
    )
    async with explain_access_errors(connection.bootstrap_servers, connection.security):
        await producer.start()
    try:
        for key in [*record_keys, *label_keys]:
            await producer.send_and_wait(topic, key=key.encode(), value=None)
    finally:
        await producer.stop()
    return len(record_keys) + len(label_keys)


def run_audit_sink(kafka: KafkaLoopOptions, audit: AuditSettings, layout: TopicLayout) -> int:
    """Run the sink until SIGTERM/SIGINT; the exit code. Creates the audit topic (as
    ``layout`` says) if it is missing and the store's schema on first use; a broker that
    does not answer within ``broker_connect_timeout_s`` ends it with one line and exit
    code 8."""
    try:
        return asyncio.run(_serve(kafka, audit, layout))
    finally:
        logging.shutdown()


async def _serve(kafka: KafkaLoopOptions, audit: AuditSettings, layout: TopicLayout) -> int:
    try:
        signer = load_signer(audit)
    except KeyFileError as exc:
        log.error("audit_sink_failed", error=str(exc))
        return 2
    connection = kafka.connection
    try:
        await await_topics(
            connection.bootstrap_servers,
            [audit_topic_spec(layout), audit_checkpoint_topic_spec(layout)],
            connection.security,
            give_up_s=connection.connect_timeout_s,
        )
    except BrokerUnreachable as exc:
        log.error("broker_unreachable", **exc.fields, exit_code=EXIT_BROKER_UNREACHABLE)
        return EXIT_BROKER_UNREACHABLE
    asyncio.get_running_loop().call_later(START_UP_SETTLE_S, start_up_done)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with AuditStore(audit.store_url) as store:
        sink = AuditSink(kafka, audit, store, signer=signer)
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


def load_signer(audit: AuditSettings) -> Signer | None:
    """The signer of ``audit.signing_key_file``; None when none is set. Raises
    :class:`KeyFileError` (one line) when the file cannot be used."""
    path = audit.signing_key_file
    return None if path is None else Signer.from_file(path)


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
