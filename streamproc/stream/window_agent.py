"""The ``count-windows`` agent: per-assistant tumbling windows over answer outcomes.

It reads the compact outcomes the judging stage publishes (keyed by assistant), keeps
window state in a changelogged faust table (layout: ``window_table.py``) and emits an
aggregate when a window closes. A tick looks only at the windows an in-memory index
(``window_index.py``) says are due, never at the whole table.
A timer sends a tiny "tick" into each outcome partition this worker owns, so windows
close on time even when an assistant goes quiet: table writes must happen inside the
stream that owns the partition, which a timer is not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import UTC, datetime

import faust
import structlog
from faust.types import StreamT, TopicT
from pydantic import BaseModel, ValidationError

from streamproc.config import Settings
from streamproc.events import DeadLetterReason
from streamproc.stream.intake import MessageOrigin, Rejection, dead_letter_for
from streamproc.stream.window_index import PartitionIndex
from streamproc.stream.window_table import (
    count_outcome,
    forget_expired_seen,
    index_timing,
    mark_closed,
    persist_watermark,
    rebuild_index,
    windows_to_close,
)
from streamproc.stream.windows import AnswerOutcome, close_window

__all__ = ["TICK", "install_window_agent"]

log = structlog.get_logger(__name__)

TICK = b'{"kind":"tick"}'
"""Control record on the outcomes topic: 'check which windows can close now'."""


def install_window_agent(
    app: faust.App,
    settings: Settings,
    *,
    outcomes: TopicT,
    aggregates: TopicT,
    dead_letters: TopicT,
) -> None:
    """Add the window table, the ``count-windows`` agent and the tick timer to ``app``."""
    window = settings.window
    timing = index_timing(window)
    windows = app.Table(
        "window-state",
        partitions=settings.topics.partitions,
        help="Windows, seen marks of counted events and watermarks (see window_table.py).",
    )
    # Derived from the table, per outcome partition. Dropped when a rebalance's recovery
    # completes (the table may have changed under us: a partition came back from another
    # worker) and rebuilt from the table by the first record of that partition after it.
    # faust calls recovery callbacks before it resumes the partitions, so no record of
    # a new assignment is processed against an old index.
    indexes: dict[int, PartitionIndex] = {}

    @windows.on_recover
    async def forget_indexes() -> None:
        indexes.clear()

    def index_of(partition: int) -> PartitionIndex:
        index = indexes.get(partition)
        if index is None:
            index = rebuild_index(list(windows.items()), partition, timing)
            indexes[partition] = index
            log.info(
                "window_index_rebuilt",
                partition=partition,
                watermark=index.watermark,
                queued=index.sizes(),
            )
        return index

    async def count_windows(stream: StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            partition = message.partition
            now = time.time()
            parsed = _parse_outcome(event.value)
            if isinstance(parsed, AnswerOutcome):
                try:
                    # A window whose end is not a datetime could never be closed.
                    datetime.fromtimestamp(parsed.occurred_at.timestamp() + window.size_s, UTC)
                    count_outcome(
                        windows,
                        index_of(partition),
                        parsed,
                        partition=partition,
                        size_s=window.size_s,
                        now=now,
                    )
                except Exception as exc:  # noqa: BLE001 - one outcome must not stop the windows
                    parsed = Rejection(
                        DeadLetterReason.PROCESSING_ERROR, f"outcome not counted: {exc!r}"
                    )
            if isinstance(parsed, Rejection):
                origin = MessageOrigin(
                    message.topic, message.partition, message.offset, message.key
                )
                letter = dead_letter_for(parsed, origin, event.value)
                await (await dead_letters.send(key=origin.key, value=_json(letter)))
                log.warning("dead_letter", reason=letter.reason.value, error=letter.error)
            elif parsed is None:  # a tick: close what is due in this partition
                await on_tick(partition, now)

    async def on_tick(partition: int, now: float) -> None:
        index = index_of(partition)
        for key, state in windows_to_close(windows, index, now):
            closed, aggregate = close_window(state, now=now)
            # The window counts as closed only once the broker has its aggregate.
            await (
                await aggregates.send(key=aggregate.assistant_id.encode(), value=_json(aggregate))
            )
            mark_closed(windows, index, key, closed)
            log.info(
                "window_closed",
                assistant_id=aggregate.assistant_id,
                window_start=aggregate.window_start.isoformat(),
                answers=aggregate.answers,
                hallucinated=aggregate.hallucinated,
                revision=aggregate.revision,
            )
        forget_expired_seen(windows, index, now)
        persist_watermark(windows, index, partition)

    async def send_ticks() -> None:
        for partition in _owned_partitions(app, outcomes.get_topic_name()):
            await outcomes.send(value=TICK, partition=partition)

    app.agent(outcomes, name="count-windows")(count_windows)
    app.timer(window.tick_s, name="window-ticks")(send_ticks)


def _owned_partitions(app: faust.App, topic: str) -> Iterable[int]:
    return sorted(tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic)


def _parse_outcome(raw: bytes | None) -> AnswerOutcome | Rejection | None:
    """An outcome, None for a tick, or why the record is unreadable."""
    if raw == TICK:
        return None
    try:
        document = json.loads(raw or b"")
        return AnswerOutcome.model_validate(document)
    except (ValueError, ValidationError, RecursionError) as exc:
        return Rejection(DeadLetterReason.SCHEMA_VIOLATION, f"bad outcome record: {exc}")


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()
