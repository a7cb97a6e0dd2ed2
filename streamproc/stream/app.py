"""``create_app``: the faust application, built from settings and a judge, doing nothing
on import.

Two agents:
- ``judge-answers`` reads raw answer bytes in micro-batches, runs the judging stage in an
  executor (never on the event loop) and publishes verdicts, flags, dead letters and one
  compact outcome per answer (keyed by assistant) to an internal topic;
- ``count-windows`` reads those outcomes and keeps per-assistant tumbling windows in a
  changelogged table, emitting an aggregate when a window closes.

A timer sends a tiny "tick" into each outcome partition this worker owns, so windows
close on time even when an assistant goes quiet: table writes must happen inside the
stream that owns the partition, which a timer is not.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any, cast

import faust
import structlog
from faust.types import EventT, StreamT, TopicT
from pydantic import BaseModel

from streamproc.config import Settings
from streamproc.judge import Judge
from streamproc.stream.intake import MessageOrigin
from streamproc.stream.judging import (
    IncomingMessage,
    StageOutput,
    judge_messages,
    trace_id_from_traceparent,
)
from streamproc.stream.topics import DEAD_LETTER_MAX_BYTES
from streamproc.stream.window_agent import install_window_agent

__all__ = ["create_app"]

log = structlog.get_logger(__name__)


def create_app(settings: Settings, judge: Judge, *, executor: Executor | None = None) -> faust.App:
    """Build the faust app; starts nothing. ``executor`` runs the judge (default: a thread
    pool of ``worker.judge_threads``)."""
    tansu = settings.broker_flavour == "tansu"
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        store="memory://",
        autodiscover=False,
        env={},  # settings come from STREAMPROC_* only, never faust's unprefixed variables
        web_enabled=False,
        topic_partitions=settings.topics.partitions,
        topic_replication_factor=settings.topics.replication_factor,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=DEAD_LETTER_MAX_BYTES,
        # Tansu under-reports the last offset of multi-record batches; one record per batch.
        producer_max_batch_size=1 if tansu else 16384,
        broker_rebalance_timeout=settings.worker.rebalance_timeout_s,
        broker_session_timeout=settings.worker.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.worker.session_timeout_s / 3),
        table_standby_replicas=0,
    )
    topics = settings.topics
    answers = _raw_topic(app, topics.answers, topics.partitions)
    verdicts = _raw_topic(app, topics.verdicts, topics.partitions)
    flags = _raw_topic(app, topics.flags, topics.partitions)
    dead_letters = _raw_topic(app, topics.dead_letter, topics.partitions)
    outcomes = _raw_topic(app, topics.outcomes, topics.partitions)
    aggregates = _raw_topic(app, topics.aggregates, topics.partitions)
    pool = executor or ThreadPoolExecutor(
        max_workers=settings.worker.judge_threads, thread_name_prefix="judge"
    )

    async def publish(output: StageOutput) -> None:
        pending: list[Awaitable[Any]] = []
        for letter in output.dead_letters:
            pending.append(
                await dead_letters.send(key=_b64key(letter.key_b64), value=_json(letter))
            )
        for verdict in output.verdicts:
            pending.append(
                await verdicts.send(key=verdict.answer_id.encode(), value=_json(verdict))
            )
        for flag in output.flags:
            pending.append(await flags.send(key=flag.answer_id.encode(), value=_json(flag)))
        for outcome in output.outcomes:
            pending.append(
                await outcomes.send(key=outcome.assistant_id.encode(), value=_json(outcome))
            )
        # Wait for the broker to have everything before the input offsets are acked.
        await asyncio.gather(*pending)
        for letter in output.dead_letters:
            log.warning(
                "dead_letter",
                reason=letter.reason.value,
                error=letter.error,
                partition=letter.partition,
                offset=letter.offset,
            )
        for verdict in output.verdicts:
            log.info(
                "verdict",
                answer_id=verdict.answer_id,
                action=verdict.judgement.action.value,
                hallucinated=verdict.judgement.hallucinated,
                trace_id=verdict.trace_id,
            )

    async def judge_answers(stream: StreamT[bytes]) -> None:
        loop = asyncio.get_running_loop()
        async for events in cast(faust.Stream[bytes], stream).take_events(
            settings.worker.batch_max, within=settings.worker.batch_wait_s
        ):
            messages = [_incoming(event) for event in events]
            work = partial(
                judge_messages, messages, judge, max_event_bytes=settings.worker.max_event_bytes
            )
            output = await loop.run_in_executor(pool, work)
            await publish(output)

    app.agent(answers, name="judge-answers")(judge_answers)
    install_window_agent(
        app, settings, outcomes=outcomes, aggregates=aggregates, dead_letters=dead_letters
    )
    return app


def _raw_topic(app: faust.App, name: str, partitions: int) -> TopicT:
    """A topic of plain bytes: we (de)serialise with pydantic ourselves, so a bad record
    reaches our code (and the dead-letter topic) instead of failing inside faust."""
    return app.topic(
        name,
        partitions=partitions,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )


def _incoming(event: EventT[bytes]) -> IncomingMessage:
    headers = _headers(event)
    return IncomingMessage(
        value=event.value,
        origin=_origin(event),
        trace_id=trace_id_from_traceparent(headers.get("traceparent")),
    )


def _origin(event: EventT[bytes]) -> MessageOrigin:
    message = event.message
    return MessageOrigin(
        topic=message.topic, partition=message.partition, offset=message.offset, key=message.key
    )


def _headers(event: EventT[bytes]) -> dict[str, bytes | str]:
    """Headers by lower-case name; faust hands them over as a mapping or as pairs."""
    raw: Any = event.message.headers or {}
    pairs: Iterable[tuple[str, bytes | str]] = raw.items() if isinstance(raw, dict) else raw
    return {str(name).lower(): value for name, value in pairs}


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()


def _b64key(key_b64: str | None) -> bytes | None:
    return None if key_b64 is None else base64.b64decode(key_b64)
