"""A repeated (tenant, event_id) is judged once within ``worker.dedup_horizon_s``.

A producer that retries, or replays a file, sends the same event again; each copy would
be judged, published and counted. The judging loop keeps, per owned answers partition,
a mark for each (tenant, event_id) it published a verdict for, and drops a later message
with a marked identity before it is judged: acknowledged with its batch, logged as a
repeat and counted (``streamproc_duplicate_events_total``), never published again - no
dead letter either (it would copy the event's bytes once per retry). The identity is
the tenant's: another tenant's event of the same id is judged.

Bounds: a mark is forgotten ``horizon_s`` after it was made, and a partition keeps at most
``max_entries`` marks (the oldest go first). Marks are changelogged like the window
state: partition p of the compacted ``<app_id>.judge-dedup-changelog`` topic holds the
marks of answers partition p, each change sent in the transaction of the batch that made
it, and a worker taking p over reads them back before it reads p. A repeat that comes
after its mark was forgotten is judged again.

The loop must reach every message's identity before judging, so it reads the two fields
with a plain ``json.loads`` (:func:`event_identity`); anything that does not parse is left
to the judging stage, which dead-letters it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import structlog
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

from streamproc.kafka.changelog import restore_states
from streamproc.kafka.consumer import KafkaLoopOptions
from streamproc.kafka.store import TrackedStore, encode_entry
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.stage import IncomingMessage, StageOutput

__all__ = ["MARK_PREFIX", "EventDedup", "JudgeDedup", "event_identity", "mark_key"]

log = structlog.get_logger(__name__)

MARK_PREFIX: Final = "e|"

Identity = tuple[str, str]
"""(tenant, event_id)."""


def event_identity(value: bytes | None, max_bytes: int) -> Identity | None:
    """(tenant, event_id) of an answer event's bytes, or None when they are not a JSON
    object with both as strings (or larger than ``max_bytes``: the stage refuses it)."""
    if value is None or len(value) > max_bytes:
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    tenant, event_id = parsed.get("tenant"), parsed.get("event_id")
    if isinstance(tenant, str) and isinstance(event_id, str) and tenant and event_id:
        return tenant, event_id
    return None


def mark_key(identity: Identity) -> str:
    """A mark's changelog key: a JSON list, so no tenant or id can make two read alike."""
    return MARK_PREFIX + json.dumps(list(identity), separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class _Marks:
    """One partition's marks: the changelogged store and the same keys oldest first."""

    store: TrackedStore
    order: dict[str, float] = field(default_factory=dict)
    """key -> marked at (epoch seconds), in the order made (a dict keeps it)."""
    changelog: bool = True
    """False when the changelog topic has no partition for it: kept in memory only."""


class EventDedup:
    """The marks of the answers partitions one worker owns; see the module docstring."""

    def __init__(self, *, horizon_s: float, max_entries: int) -> None:
        self.horizon_s = horizon_s
        self.max_entries = max_entries
        self._partitions: dict[int, _Marks] = {}

    @property
    def enabled(self) -> bool:
        return self.horizon_s > 0

    # ----------------------------------------------------------------- ownership

    def restore(self, partition: int, state: Mapping[str, Any], *, changelog: bool = True) -> int:
        """Take ``partition`` over with its changelogged marks; how many were kept."""
        kept = {
            key: float(at)
            for key, at in state.items()
            if key.startswith(MARK_PREFIX) and isinstance(at, int | float)
        }
        marks = _Marks(TrackedStore(dict(kept)), changelog=changelog)
        for key, at in sorted(kept.items(), key=lambda item: item[1]):
            marks.order[key] = at
        self._partitions[partition] = marks
        return len(marks.order)

    def forget(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the marks of ``partitions`` (None: all), given up in a rebalance."""
        if partitions is None:
            self._partitions.clear()
            return
        for partition in partitions:
            self._partitions.pop(partition, None)

    # ----------------------------------------------------------------- marks

    def seen(self, partition: int, identity: Identity, now: float) -> bool:
        """Whether ``identity`` was judged in ``partition`` less than ``horizon_s`` ago."""
        marks = self._partitions.get(partition)
        if marks is None:
            return False
        at = marks.order.get(mark_key(identity))
        return at is not None and now - at < self.horizon_s

    def mark(self, partition: int, identity: Identity, now: float) -> None:
        """Remember that ``identity`` was judged now, then forget what is out of bounds."""
        marks = self._partitions.setdefault(partition, _Marks(TrackedStore()))
        key = mark_key(identity)
        marks.order.pop(key, None)  # a re-judged identity moves to the young end
        marks.order[key] = now
        marks.store[key] = now
        self._evict(marks, now)

    def size(self, partition: int) -> int:
        marks = self._partitions.get(partition)
        return 0 if marks is None else len(marks.order)

    def _evict(self, marks: _Marks, now: float) -> None:
        while marks.order:
            key, at = next(iter(marks.order.items()))
            if len(marks.order) <= self.max_entries and now - at < self.horizon_s:
                return
            del marks.order[key]
            del marks.store[key]

    # ----------------------------------------------------------------- changelog

    def changelog_records(self, topic: OutputTopic[Any]) -> list[OutboundRecord]:
        """Each partition's changes since the last call, for partition p of ``topic``
        (a forgotten mark as a tombstone)."""
        records: list[OutboundRecord] = []
        for partition, marks in self._partitions.items():
            changes = marks.store.drain()
            if not marks.changelog:
                continue
            for key, value in changes:
                encoded_key, encoded_value = encode_entry(key, value)
                records.append(topic.forward(encoded_key, encoded_value, partition=partition))
        return records


class JudgeDedup:
    """:class:`EventDedup` as the judging loop uses it: split a batch's messages into
    fresh ones and repeats, mark what was judged, hand the changes to the transaction,
    restore on assignment (``worker.dedup_horizon_s`` 0: repeats within a batch only)."""

    def __init__(self, kafka: KafkaLoopOptions, client_options: Mapping[str, Any]) -> None:
        worker = kafka.worker
        self._kafka = kafka
        self._client_options = client_options
        self._max_event_bytes = worker.max_event_bytes
        self.marks = EventDedup(
            horizon_s=worker.dedup_horizon_s, max_entries=worker.dedup_max_entries
        )
        self.topic_name = kafka.names.judge_dedup_changelog
        # Created with the output topics' cap, as the window loop's changelog is.
        self._topic: OutputTopic[Any] = OutputTopic(
            self.topic_name, kafka.outputs.window_state.max_bytes
        )

    def split(
        self, messages: Sequence[IncomingMessage], now: float
    ) -> tuple[list[IncomingMessage], list[MessageOrigin]]:
        """(the messages to judge, the origins of those already judged within the horizon)."""
        if not self.marks.enabled:
            return list(messages), []
        fresh: list[IncomingMessage] = []
        repeats: list[MessageOrigin] = []
        for message in messages:
            identity = event_identity(message.value, self._max_event_bytes)
            partition = message.origin.partition
            if identity is not None and self.marks.seen(partition, identity, now):
                repeats.append(message.origin)
            else:
                fresh.append(message)
        return fresh, repeats

    def judged(self, output: StageOutput, now: float) -> None:
        """Mark every verdict of ``output`` (at its message's partition)."""
        if not self.marks.enabled:
            return
        for origin, verdict in zip(output.verdict_origins, output.verdicts, strict=True):
            self.marks.mark(origin.partition, (verdict.tenant, verdict.event_id), now)

    def records(self) -> list[OutboundRecord]:
        """The marks' changes since the last call, for the batch's transaction."""
        return self.marks.changelog_records(self._topic) if self.marks.enabled else []

    def forget(self, partitions: Sequence[TopicPartition]) -> None:
        """Drop the marks of partitions given up."""
        self.marks.forget(tp.partition for tp in partitions)

    async def _changelog_partitions(self) -> set[int]:
        """The changelog topic's partitions, as the cluster's metadata has them."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self._kafka.connection.bootstrap_servers, **self._client_options
        )
        await admin.start()
        try:
            (described,) = await admin.describe_topics([self.topic_name])
        finally:
            await admin.close()
        if described.get("error_code"):
            return set()
        return {int(part["partition"]) for part in described.get("partitions", [])}

    async def restore(self, partitions: Sequence[TopicPartition]) -> None:
        """Read the marks of ``partitions`` back from the changelog. A partition the
        changelog lacks (an answers topic made with more partitions) keeps its marks in
        memory only; a changelog that cannot be read leaves the partition's marks empty
        (logged): repeats are then judged again, nothing else changes."""
        if not self.marks.enabled or not partitions:
            return
        wanted = sorted({tp.partition for tp in partitions})
        try:
            present = await self._changelog_partitions()
            readable = [p for p in wanted if p in present]
            states = await restore_states(
                self._kafka, self.topic_name, readable, self._client_options
            )
        except Exception as exc:  # noqa: BLE001 - state lost is repeats judged, never a stop
            log.error("judge_dedup_restore_failed", partitions=wanted, error=repr(exc))
            present, states = set(), {}
        for partition in wanted:
            kept = self.marks.restore(
                partition, states.get(partition, {}), changelog=partition in present
            )
            if partition not in present:
                log.warning(
                    "judge_dedup_in_memory_only",
                    partition=partition,
                    detail=f"{self.topic_name} has no partition {partition}",
                )
            log.info("judge_dedup_restored", partition=partition, marks=kept)
