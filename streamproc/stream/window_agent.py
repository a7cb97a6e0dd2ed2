"""The ``count-windows`` agent: per-assistant tumbling windows over answer outcomes.

It reads the compact outcomes the judging stage publishes (keyed by assistant), keeps
window state in a changelogged faust table and emits an aggregate when a window closes.
A timer sends a tiny "tick" into each outcome partition this worker owns, so windows
close on time even when an assistant goes quiet: table writes must happen inside the
stream that owns the partition, which a timer is not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import faust
import structlog
from faust.types import StreamT, TopicT
from pydantic import BaseModel, ValidationError

from streamproc.config import Settings
from streamproc.events import DeadLetterReason
from streamproc.stream.intake import MessageOrigin, Rejection, dead_letter_for
from streamproc.stream.windows import (
    AnswerOutcome,
    WindowState,
    add_outcome,
    close_window,
    is_due,
    is_expired,
    window_key,
    window_start,
)

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
    windows = app.Table(
        "window-state",
        partitions=settings.topics.partitions,
        help="Open and recently closed tumbling windows, as JSON (see windows.py).",
    )

    async def count_windows(stream: StreamT[bytes]) -> None:
        watermarks: dict[int, float] = {}
        async for event in stream.events():
            message = event.message
            partition = message.partition
            now = time.time()
            parsed = _parse_outcome(event.value)
            if isinstance(parsed, AnswerOutcome):
                occurred = parsed.occurred_at.timestamp()
                watermarks[partition] = max(watermarks.get(partition, occurred), occurred)
                start = window_start(occurred, window.size_s)
                key = window_key(parsed.assistant_id, start)
                previous = windows.get(key)
                state = add_outcome(
                    None if previous is None else WindowState.model_validate(previous),
                    parsed,
                    partition=partition,
                    size_s=window.size_s,
                    now=now,
                )
                windows[key] = state.model_dump(mode="json")
            elif isinstance(parsed, Rejection):
                origin = MessageOrigin(
                    message.topic, message.partition, message.offset, message.key
                )
                letter = dead_letter_for(parsed, origin, event.value)
                await (await dead_letters.send(key=origin.key, value=_json(letter)))
                log.warning("dead_letter", reason=letter.reason.value, error=letter.error)
            else:  # a tick: close what is due in this partition
                await close_due(partition, watermarks.get(partition), now)

    async def close_due(partition: int, watermark: float | None, now: float) -> None:
        for key, raw in list(windows.items()):
            state = WindowState.model_validate(raw)
            if state.partition != partition:
                continue
            if is_due(
                state,
                watermark=watermark,
                now=now,
                grace_s=window.grace_s,
                idle_s=window.idle_close_s,
            ):
                closed, aggregate = close_window(state, now=now)
                # The window counts as closed only once the broker has its aggregate.
                await (
                    await aggregates.send(
                        key=aggregate.assistant_id.encode(), value=_json(aggregate)
                    )
                )
                windows[key] = closed.model_dump(mode="json")
                log.info(
                    "window_closed",
                    assistant_id=aggregate.assistant_id,
                    window_start=aggregate.window_start.isoformat(),
                    answers=aggregate.answers,
                    hallucinated=aggregate.hallucinated,
                    revision=aggregate.revision,
                )
            elif is_expired(state, now=now, retain_s=window.retain_closed_s):
                del windows[key]

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
