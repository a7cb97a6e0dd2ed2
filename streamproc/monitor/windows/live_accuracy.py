"""The judge's live accuracy per cell, as the window loop reads it: a global table.

The accuracy loop publishes one :class:`~streamproc.contracts.label_events.JudgeAccuracyEvent` per
(tenant, assistant, task type, judge) cell to the compacted ``labels.accuracy_topic``,
keyed by the cell. Every window worker needs every cell (its series may be of any
assistant, whichever outcome partitions it owns), so the table reads all partitions from
the beginning with a ``read_committed`` consumer of no group, keeps the latest event per
cell, and follows the topic in a background task for as long as the window loop runs.

A record it cannot read is logged and skipped: the windows then correct that cell with
the offline counts, which is what they did before any label came. A reader that fails
(broker gone) starts again from the beginning after a pause; the table it had stays in
use meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Final

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from streamproc.contracts.label_events import AccuracyCell, JudgeAccuracyEvent
from streamproc.monitor.windows.panes import LiveCounts
from streamproc.rates.live_accuracy import live_confusion

__all__ = ["CATCH_UP_TIMEOUT_S", "LiveAccuracy", "LiveCorrection"]

log = structlog.get_logger(__name__)

CATCH_UP_TIMEOUT_S: Final = 30.0
"""How long :meth:`LiveAccuracy.start` waits for the table to reach the topic's end
before the windows go on without it (they use the offline counts until it has)."""
_RETRY_S: Final = 5.0
_METADATA_MAX_AGE_MS: Final = 5000
"""How soon the reader sees the topic created, or partitions added to it."""


class LiveAccuracy:
    """The latest judge-accuracy event per cell; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        client_options: Mapping[str, Any] | None = None,
        catch_up_timeout_s: float = CATCH_UP_TIMEOUT_S,
    ) -> None:
        """``topic``: the judge-accuracy topic (``labels.accuracy_topic``);
        ``client_options``: the clients' security options."""
        self._bootstrap = bootstrap_servers
        self._topic = topic
        self._client_options: Mapping[str, Any] = client_options or {}
        self._catch_up_timeout_s = catch_up_timeout_s
        self._cells: dict[str, JudgeAccuracyEvent] = {}
        self._caught_up = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.skipped = 0
        """Records that were not judge-accuracy events (logged, skipped)."""

    # ------------------------------------------------------------------ reads

    def lookup(
        self, tenant: str, assistant_id: str, task_type: str, judge_key: str
    ) -> JudgeAccuracyEvent | None:
        """The cell's latest event, None when no label reached it yet."""
        cell = AccuracyCell(
            tenant=tenant, assistant_id=assistant_id, task_type=task_type, judge_key=judge_key
        )
        return self._cells.get(cell.key)

    def __len__(self) -> int:
        return len(self._cells)

    @property
    def caught_up(self) -> bool:
        """The table has read every partition to the end it had at start."""
        return self._caught_up.is_set()

    def for_judge(self, judge_key: str, *, min_labels: int) -> LiveCorrection:
        """The window's view of the table: one judge's cells, live once they have
        ``min_labels`` labelled answers of both classes."""
        return LiveCorrection(self, judge_key, min_labels)

    # ------------------------------------------------------------------ writes

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the accuracy topic: an event replaces its cell's, a tombstone
        deletes the cell; anything else is logged and skipped."""
        if value is None:
            if key is not None:
                self._cells.pop(key.decode(errors="replace"), None)
            return
        try:
            event = JudgeAccuracyEvent.model_validate_json(value)
        except (ValidationError, ValueError) as exc:
            self.skipped += 1
            log.warning("live_accuracy_record_skipped", error=str(exc)[:300])
            return
        self._cells[event.cell.key] = event

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start following the topic; return once the table has caught up with it, or
        after ``catch_up_timeout_s`` (logged) - the windows never wait for it longer."""
        if self._task is None:
            self._task = asyncio.create_task(self._follow_forever(), name="live-accuracy")
        try:
            await asyncio.wait_for(self._caught_up.wait(), self._catch_up_timeout_s)
        except TimeoutError:
            log.warning(
                "live_accuracy_not_caught_up",
                topic=self._topic,
                after_s=self._catch_up_timeout_s,
                cells=len(self._cells),
            )
        else:
            log.info("live_accuracy_caught_up", topic=self._topic, cells=len(self._cells))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow_forever(self) -> None:
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the table must outlive a broker hiccup
                log.warning("live_accuracy_reader_failed", topic=self._topic, error=repr(exc))
                await asyncio.sleep(_RETRY_S)

    async def _follow(self) -> None:
        # Subscribed without a group: aiokafka assigns every partition itself, and
        # notices the topic (and new partitions) at its next metadata refresh.
        reader = AIOKafkaConsumer(
            self._topic,
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            metadata_max_age_ms=_METADATA_MAX_AGE_MS,
            **self._client_options,
        )
        await reader.start()
        try:
            if self._topic not in await reader.topics():
                # Nothing published yet: nothing to catch up with (the windows must not
                # wait for a topic that may never come).
                log.info("live_accuracy_waiting_for_topic", topic=self._topic)
                self._caught_up.set()
            ends: dict[TopicPartition, int] | None = None
            while True:
                batch = await reader.getmany(timeout_ms=1000)
                for records in batch.values():
                    self._apply_all(records)
                if self._caught_up.is_set():
                    continue
                assigned = sorted(reader.assignment())
                if assigned and ends is None:
                    ends = await reader.end_offsets(assigned)
                if ends is not None and await _reached(reader, ends):
                    self._caught_up.set()
        finally:
            await reader.stop()

    def _apply_all(self, records: list[ConsumerRecord[bytes, bytes]]) -> None:
        for record in records:
            self.apply(record.key, record.value)


async def _reached(reader: AIOKafkaConsumer, ends: Mapping[TopicPartition, int]) -> bool:
    """Whether the reader's position is at or past ``ends`` on every partition."""
    for tp, end in ends.items():
        if await reader.position(tp) < end:
            return False
    return True


class LiveCorrection:
    """One judge's live counts per cell, as the windows ask for them
    (:class:`~streamproc.monitor.windows.panes.LiveCells`)."""

    def __init__(self, table: LiveAccuracy, judge_key: str, min_labels: int) -> None:
        self._table = table
        self.judge_key = judge_key
        self.min_labels = min_labels

    def live_counts(self, tenant: str, assistant_id: str, task_type: str) -> LiveCounts | None:
        event = self._table.lookup(tenant, assistant_id, task_type, self.judge_key)
        if event is None:
            return None
        counts = live_confusion(event, min_labels=self.min_labels)
        return None if counts is None else LiveCounts(counts, event.labelled_answers)
