"""The HTTP path's outbox: a decision's monitored records are kept in memory and published
by a background task, so a reply never waits on the broker.

- Bounded by records and by bytes (key, value and headers). :meth:`Outbox.has_room` is
  asked *before* a request is judged: once either bound is reached, the server answers new
  requests at once by policy (``OUTBOX_FULL``) and keeps none of their records. A request
  that was admitted always has its records kept (:meth:`Outbox.put` never refuses), so the
  bound may be passed by what the requests in flight bring - at most the service's pending
  capacity times one decision's records.
- Published once each. One task hands the queued records to the sink, a batch at a time,
  and waits for the broker without a time limit (an idempotent producer retries what it
  sent until it is acknowledged; a retry with a new send could write a record twice).
  Records the sink reports as definitely not written (:class:`RecordsNotTaken`) are sent
  again after ``retry_s``; after ``max_attempts`` they are logged and counted as lost.
- Health. While the oldest record has waited longer than ``stall_s`` (the broker is frozen,
  away or refusing), or while the outbox is full, :meth:`Outbox.unready_reason` says why:
  ``/readyz`` turns 503, so a load balancer sends callers elsewhere.
- Shutdown. :meth:`Outbox.close` waits up to its ``drain_s`` for the queue to empty, then
  stops; what is still held is logged and counted (``lost``). A kill -9 loses whatever is
  held at that moment: at most the bounds (``streamproc_gate_outbox_held_records`` shows it).

No Kafka here: the sink is a port (:class:`~streamproc.gate.sink.RecordSink`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from streamproc.gate.sink import RecordSink, RecordsNotTaken
from streamproc.verdicts.record import OutboundRecord

__all__ = ["Outbox", "OutboxLimits", "UnreadyReason", "record_bytes"]

log = structlog.get_logger(__name__)

UnreadyReason = Literal["outbox_full", "broker_unavailable"]

_BATCH_RECORDS = 500
_BATCH_BYTES = 1024 * 1024
"""A batch handed to the sink at once: up to this many records and bytes (at least one
record), so one batch never holds the event loop long."""


def record_bytes(record: OutboundRecord) -> int:
    """What one record holds in memory, near enough: key, value and headers."""
    size = len(record.key or b"") + len(record.value or b"") + len(record.topic)
    return size + sum(len(name) + len(value) for name, value in record.headers)


@dataclass(frozen=True, slots=True)
class OutboxLimits:
    max_records: int
    max_bytes: int
    stall_s: float
    drain_s: float
    retry_s: float = 1.0
    max_attempts: int = 5


@dataclass(slots=True)
class _HeldRecord:
    record: OutboundRecord
    size: int
    since: float
    attempts: int = 0


class Outbox:
    """Bounded in-memory outbox with one publishing task; see the module doc. Use from
    the event loop only."""

    def __init__(
        self,
        sink: RecordSink,
        limits: OutboxLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        self._limits = limits
        self._clock = clock
        self._queue: deque[_HeldRecord] = deque()
        self._sending: list[_HeldRecord] = []
        self._bytes = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_failure: float | None = None
        self.published = 0
        """Records acknowledged by the broker."""
        self.lost = 0
        """Records given up (refused ``max_attempts`` times, or held at shutdown)."""
        self.refused = 0
        """Records of requests answered ``OUTBOX_FULL`` (never kept)."""

    # ------------------------------------------------------------------ state

    @property
    def records(self) -> int:
        """Records held now (queued or being published)."""
        return len(self._queue) + len(self._sending)

    @property
    def bytes(self) -> int:
        return self._bytes

    def has_room(self) -> bool:
        """Below both bounds: a new request's records will be kept."""
        limits = self._limits
        return self.records < limits.max_records and self._bytes < limits.max_bytes

    def oldest_age_s(self) -> float:
        """How long the oldest record held has waited (0 when empty)."""
        oldest = [held.since for held in (*self._sending[:1], *list(self._queue)[:1])]
        return max(0.0, self._clock() - min(oldest)) if oldest else 0.0

    def unready_reason(self) -> UnreadyReason | None:
        """None while records flow; else why the gate should not take traffic."""
        if not self.has_room():
            return "outbox_full"
        if self.oldest_age_s() > self._limits.stall_s:
            return "broker_unavailable"
        failed = self._last_failure
        if failed is not None and self.records and self._clock() - failed < self._limits.stall_s:
            return "broker_unavailable"
        return None

    # ------------------------------------------------------------------ records in

    def put(self, records: Sequence[OutboundRecord]) -> None:
        """Keep ``records`` for publishing (never refuses: room was asked before)."""
        now = self._clock()
        for record in records:
            held = _HeldRecord(record, record_bytes(record), now)
            self._queue.append(held)
            self._bytes += held.size
        if records:
            self._wake.set()

    def refuse(self, records: int) -> None:
        """Count the records of a request answered ``OUTBOX_FULL``."""
        self.refused += records

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="gate-outbox")

    async def close(self) -> int:
        """Wait up to ``drain_s`` for everything held to be published, then stop; the
        number of records left unpublished (counted as lost)."""
        deadline = self._clock() + self._limits.drain_s
        while self.records and self._task is not None and not self._task.done():
            if self._clock() >= deadline:
                break
            await asyncio.sleep(0.02)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        left = self.records
        if left:
            self.lost += left
            log.error(
                "gate_outbox_not_drained",
                records=left,
                bytes=self._bytes,
                drain_s=self._limits.drain_s,
            )
        self._queue.clear()
        self._sending = []
        self._bytes = 0
        return left

    # ------------------------------------------------------------------ publishing

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self._next_batch()
            self._sending = batch
            failed = await self._publish(batch)
            self._sending = []
            failed_ids = {id(held) for held in failed}
            done = [held for held in batch if id(held) not in failed_ids]
            self.published += len(done)
            self._bytes -= sum(held.size for held in done)
            if failed:
                self._requeue(failed)
                await asyncio.sleep(self._limits.retry_s)

    def _next_batch(self) -> list[_HeldRecord]:
        batch: list[_HeldRecord] = []
        size = 0
        queue = self._queue
        while queue and len(batch) < _BATCH_RECORDS:
            if batch and size + queue[0].size > _BATCH_BYTES:
                break
            held = queue.popleft()
            batch.append(held)
            size += held.size
        return batch

    async def _publish(self, batch: list[_HeldRecord]) -> list[_HeldRecord]:
        """The held records of ``batch`` not written (to send again)."""
        try:
            await self._sink.publish([held.record for held in batch])
        except asyncio.CancelledError:
            raise
        except RecordsNotTaken as exc:
            not_taken = {id(record) for record in exc.failed}
            failed = [held for held in batch if id(held.record) in not_taken]
            self._failure(exc.cause, failed)
            return failed
        except Exception as exc:  # noqa: BLE001 - a sink bug must not stop publishing
            self._failure(repr(exc), batch)
            return batch
        self._last_failure = None
        return []

    def _failure(self, cause: str, failed: Sequence[_HeldRecord]) -> None:
        self._last_failure = self._clock()
        topics = sorted({held.record.topic for held in failed})
        log.warning(
            "gate_outbox_publish_failed",
            records=len(failed),
            bytes=sum(held.size for held in failed),
            topics=topics[:10],
            cause=cause[:500],
        )

    def _requeue(self, failed: list[_HeldRecord]) -> None:
        """Failed records go back to the front, in order, unless given up."""
        again: list[_HeldRecord] = []
        for held in failed:
            held.attempts += 1
            if held.attempts >= self._limits.max_attempts:
                self.lost += 1
                self._bytes -= held.size
                record = held.record
                log.error(
                    "gate_outbox_record_lost",
                    topic=record.topic,
                    key=(record.key or b"")[:200].decode("utf-8", "replace"),
                    size=held.size,
                    attempts=held.attempts,
                )
            else:
                again.append(held)
        self._queue.extendleft(reversed(again))
