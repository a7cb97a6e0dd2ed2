"""The gate's Kafka request / reply: requests in on ``gate.requests_topic``, each reply
to the topic its ``reply-topic`` header names, exactly once on real Kafka.

Per batch read (consumer group ``<app_id>.gate``):

1. Each record's headers: ``reply-topic`` and ``correlation-id`` (where the reply goes
   and how the caller matches it), ``x-budget-ms`` (:meth:`GateService.budget`) and the
   caller's ``traceparent`` (continued).
2. The budget runs from when the request was produced, not when it was read: the time
   it spent on the topic (record timestamp to wall clock, never below 0) is taken off by
   dating the request's arrival back. A request already older than its budget is
   answered at once by policy (the service settles it with whatever it can do in no
   time, ``BUDGET_EXCEEDED``); its caller has given up, but what is monitored says so.
3. The batch's valid requests are checked concurrently (:meth:`GateService.check`
   never raises; it answers each within its budget).
4. One transaction per batch: every reply (:class:`~streamproc.gate_events.GateReply`
   JSON, key and ``correlation-id`` header the request's correlation id, the trace
   headers), every monitored record (verdict, flag, outcome, audit, review item), every
   dead letter and the input offsets. A ``read_committed`` caller sees a reply only if
   its verdict is published, and each verdict once.

A bad request never stops the loop: one with no usable ``reply-topic`` or
``correlation-id`` (absent, not a legal topic, an internal or a missing topic) becomes a
dead letter (``schema_violation``, saying which header); one with a reply route but a
bad budget or a bad event gets a :class:`~streamproc.gate_events.GateError` reply and a
dead letter with its original bytes. The replies of one batch go out together, when the
last of its requests is decided: a batch holds requests read together, so their budgets
mostly end together; a caller mixing very different budgets on one topic sees the
short ones answered when the long ones are.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import ConsumerRecord

from streamproc.adapters.trace_headers import passthrough
from streamproc.config import Settings
from streamproc.events import DeadLetterReason
from streamproc.gate.request import GateRequest, GateResult
from streamproc.gate.sensor import GateSensor, NullGateSensor
from streamproc.gate.service import GateService
from streamproc.gate_events import (
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    GateError,
    GateErrorCode,
)
from streamproc.stream.gate.reply_topics import ReplyTopics, unusable_reply_topic
from streamproc.stream.loop.consumer import ConsumerLoop
from streamproc.stream.loop.publisher import OutboundRecord, PublishFailed
from streamproc.stream.output.catalog import OutputTopics
from streamproc.stream.output.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.stream.output.topic import OutHeaders
from streamproc.stream.topics import DEAD_LETTER_MAX_BYTES

__all__ = ["MAX_CORRELATION_ID_BYTES", "GateRequestLoop"]

log = structlog.get_logger(__name__)

MAX_CORRELATION_ID_BYTES = 255
"""A uuid4 is 32 to 36 characters; anything longer than this is not an id."""
_POLL_MS = 200
_REPLY_MARGIN_BYTES = 4096
"""Room kept under the reply topic's record limit for the record's key and headers."""
_CODES: dict[DeadLetterReason, GateErrorCode] = {
    DeadLetterReason.BAD_JSON: "bad_json",
    DeadLetterReason.SCHEMA_VIOLATION: "schema_violation",
    DeadLetterReason.OVERSIZED: "oversized",
    DeadLetterReason.EVENT_TIME_OUT_OF_RANGE: "event_time_out_of_range",
}


@dataclass(frozen=True, slots=True)
class _Route:
    """Where a request's reply goes."""

    topic: str
    correlation_id: bytes


@dataclass(frozen=True, slots=True)
class _Checked:
    request: GateRequest
    route: _Route
    result: GateResult


@dataclass(frozen=True, slots=True)
class _Refused:
    """A request not checked: its dead letter, and a GateError reply where it has a route."""

    rejection: Rejection
    origin: MessageOrigin
    value: bytes | None
    headers: OutHeaders
    route: _Route | None
    error: GateError | None


_Handled = _Checked | _Refused


class GateRequestLoop(ConsumerLoop):
    """Serve gate requests from Kafka with ``service``; see the module docstring.

    ``clock``: wall-clock seconds since the epoch, compared with the records' timestamps.
    """

    def __init__(
        self,
        settings: Settings,
        service: GateService,
        *,
        client_options: Mapping[str, Any] | None = None,
        sensor: GateSensor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        gate, worker = settings.gate, settings.worker
        self._capacity = gate.batch_max * gate.max_pending_factor
        super().__init__(
            settings,
            name="gate",
            topic=gate.requests_topic,
            client_options=client_options,
            consumer_options={
                # No more than the service holds at once: beyond, it would shed them.
                "max_poll_records": self._capacity,
                "max_partition_fetch_bytes": max(1024 * 1024, worker.max_event_bytes + 65536),
            },
            producer_options={"max_request_size": DEAD_LETTER_MAX_BYTES + 65536},
        )
        self._service = service
        self._sensor: GateSensor = sensor or NullGateSensor()
        self._clock = clock
        self._outputs = OutputTopics.from_settings(settings)
        self._max_reply_bytes = settings.topics.output_max_message_bytes - _REPLY_MARGIN_BYTES
        self.reply_topics = ReplyTopics(self._cluster_topics)
        self.answered = 0
        self.refused = 0

    async def _cluster_topics(self) -> set[str]:
        return set(await self._consumer.topics())

    # ------------------------------------------------------------------ one batch

    async def _step(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=_POLL_MS, max_records=self._capacity)
        read_at = self._generation
        if not batch:
            return
        async with self._lock:
            if not self._admit(batch, read_at):
                return
            records = [record for tp in sorted(batch) for record in batch[tp]]
            handled = await self.handle(records)
            outbound = self.outbound(handled)
            offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
            try:
                await self._publisher.publish(outbound, offsets)
            except PublishFailed:  # the loop stops: what is counted must say why
                self._sensor.publish_failed(path="kafka")
                raise
            self.watch.progress.acknowledged(offsets, time.monotonic())
        self._committed(handled)

    async def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[_Handled]:
        """Each record's fate, in order: checked (concurrently) or refused."""
        now_wall, now_mono = self._clock(), time.monotonic()
        handled: list[_Handled | GateRequest] = []
        routes: list[_Route] = []
        for record in records:
            taken = await self._take(record, now_wall, now_mono)
            if isinstance(taken, tuple):
                handled.append(taken[0])
                routes.append(taken[1])
            else:
                handled.append(taken)
        requests = [each for each in handled if isinstance(each, GateRequest)]
        results = await asyncio.gather(
            *(self._service.check(request) for request in requests), return_exceptions=True
        )
        decided = iter(zip(requests, routes, results, strict=True))
        out: list[_Handled] = []
        for each in handled:
            if not isinstance(each, GateRequest):
                out.append(each)
                continue
            request, route, result = next(decided)
            if isinstance(result, GateResult):
                out.append(_Checked(request, route, result))
            else:  # check() never raises; if it does, this request alone pays
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.error("gate_check_raised", error=repr(result))
                out.append(
                    _Refused(
                        Rejection(DeadLetterReason.PROCESSING_ERROR, f"not checked: {result!r}"),
                        request.origin,
                        request.body,
                        request.headers,
                        route,
                        GateError(error="not_ready", detail="the gate could not decide"),
                    )
                )
        return out

    async def _take(
        self, record: ConsumerRecord[bytes, bytes], now_wall: float, now_mono: float
    ) -> tuple[GateRequest, _Route] | _Refused:
        """The request of ``record`` and its route, or why it is refused."""
        origin = MessageOrigin(record.topic, record.partition, record.offset, record.key)
        headers = list(record.headers or ())
        ids, trace_headers = passthrough(headers)

        def refused(
            reason: DeadLetterReason, detail: str, route: _Route | None, error: GateError | None
        ) -> _Refused:
            rejection = Rejection(reason, detail)
            return _Refused(rejection, origin, record.value, trace_headers, route, error)

        route = await self._route(headers)
        if isinstance(route, str):
            return refused(DeadLetterReason.SCHEMA_VIOLATION, route, None, None)
        budget = self._service.budget(_header(headers, BUDGET_HEADER))
        if isinstance(budget, GateError):
            return refused(DeadLetterReason.SCHEMA_VIOLATION, budget.detail, route, budget)
        answer = self._service.parse(record.value)
        if isinstance(answer, Rejection):
            error = GateError(
                error=_CODES.get(answer.reason, "bad_request"), detail=answer.error[:2000]
            )
            return _Refused(answer, origin, record.value, trace_headers, route, error)
        spent_s = max(0.0, now_wall - record.timestamp / 1000) if record.timestamp > 0 else 0.0
        traceparent = _header(headers, "traceparent") if ids is not None else None
        request = GateRequest(
            body=record.value or b"",
            answer=answer,
            budget_ms=budget,
            arrived=now_mono - spent_s,
            origin=origin,
            headers=trace_headers,
            trace_id=ids[0] if ids is not None else None,
            traceparent=traceparent.decode("latin-1") if traceparent is not None else None,
        )
        return request, route

    async def _route(self, headers: Sequence[tuple[str, bytes | None]]) -> _Route | str:
        """The reply's route, or why the request has none."""
        raw_topic = _header(headers, REPLY_TOPIC_HEADER)
        correlation = _header(headers, CORRELATION_ID_HEADER)
        if raw_topic is None or correlation is None:
            missing = [
                name
                for name, value in (
                    (REPLY_TOPIC_HEADER, raw_topic),
                    (CORRELATION_ID_HEADER, correlation),
                )
                if value is None
            ]
            return f"gate request without the {' and '.join(missing)} header: no reply possible"
        if not 0 < len(correlation) <= MAX_CORRELATION_ID_BYTES:
            return (
                f"gate request with a {CORRELATION_ID_HEADER} header of {len(correlation)} "
                f"bytes (1 to {MAX_CORRELATION_ID_BYTES} expected): no reply possible"
            )
        topic = raw_topic.decode("latin-1")
        unusable = unusable_reply_topic(topic)
        if unusable is None and not await self.reply_topics.exists(topic):
            unusable = f"reply-topic {topic!r} does not exist"
        if unusable is not None:
            return f"gate request whose {unusable}: no reply possible"
        return _Route(topic, correlation)

    # ------------------------------------------------------------------ records

    def outbound(self, handled: Sequence[_Handled]) -> list[OutboundRecord]:
        """Replies, monitored records and dead letters of one batch."""
        records: list[OutboundRecord] = []
        now = datetime.fromtimestamp(self._clock(), UTC)
        for each in handled:
            if isinstance(each, _Checked):
                records.append(self._reply(each))
                records += each.result.records
                continue
            if each.route is not None and each.error is not None:
                records.append(
                    _reply_record(each.route, each.error.model_dump_json(), each.headers)
                )
            letter = prepare_dead_letter(
                self._outputs.dead_letters,
                each.rejection,
                each.origin,
                each.value,
                headers=each.headers,
                now=now,
            )
            log.warning(
                "gate_request_refused",
                reason=letter.model.reason.value,
                error=letter.model.error,
                replied=each.route is not None and each.error is not None,
            )
            records.append(letter.record)
        return records

    def _reply(self, checked: _Checked) -> OutboundRecord:
        """The reply, in the decision's trace (the monitored records' headers carry the
        decision span; without them, the caller's own)."""
        result = checked.result
        headers = result.records[0].headers if result.records else checked.request.headers
        value = result.reply.model_dump_json()
        if len(value) > self._max_reply_bytes:
            log.error("gate_reply_too_large", bytes=len(value), limit=self._max_reply_bytes)
            value = GateError(
                error="oversized",
                detail=f"the reply ({len(value)} bytes) is larger than a reply record may be; "
                f"the verdict is on the verdicts topic (answer_id "
                f"{result.reply.verdict.answer_id[:200]!r})",
            ).model_dump_json()
        return _reply_record(checked.route, value, headers)

    def _committed(self, handled: Sequence[_Handled]) -> None:
        """After the transaction: the sensor and the counts."""
        for each in handled:
            try:
                if isinstance(each, _Checked):
                    self.answered += 1
                    self._sensor.decided(each.result.reply, path="kafka")
                else:
                    self.refused += 1
                    self._sensor.refused(_code(each), path="kafka")
            except Exception:  # committed already: report it and go on
                log.exception("gate_sensor_failed")


def _code(refused: _Refused) -> GateErrorCode:
    """The refusal's code: its reply's, else (no reply route) its dead letter's."""
    if refused.error is not None:
        return refused.error.error
    return _CODES.get(refused.rejection.reason, "bad_request")


def _reply_record(route: _Route, value: str, headers: OutHeaders) -> OutboundRecord:
    trace = tuple((name, raw) for name, raw in headers if name != CORRELATION_ID_HEADER)
    return OutboundRecord(
        topic=route.topic,
        key=route.correlation_id,
        value=value.encode(),
        headers=((CORRELATION_ID_HEADER, route.correlation_id), *trace),
    )


def _header(headers: Sequence[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The first header ``name`` (case-insensitive) with a value."""
    for key, value in headers:
        if value is not None and key.lower() == name:
            return value
    return None
