"""The gate's Kafka request / reply: requests in on ``gate.requests_topic``, each reply
to the topic its ``reply-topic`` header names, exactly once on real Kafka.

Per batch read (consumer group ``<app_id>.gate``):

1. Each record's headers: ``reply-topic`` and ``correlation-id`` (where the reply goes
   and how the caller matches it), ``x-budget-ms`` (:meth:`GateService.budget`) and the
   caller's ``traceparent`` (continued).
2. The budget runs from when the request was produced, not when it was read: the time
   it spent on the topic (record timestamp to wall clock, never below 0) is taken off by
   dating the request's arrival back, and ``gate.kafka_reply_reserve_ms`` is kept back
   for the reply's transaction and its way to the caller (a reply after the budget is
   one the caller has stopped waiting for). A request already older than its budget is
   answered at once by policy (the service settles it with whatever it can do in no
   time, ``BUDGET_EXCEEDED``); its caller has given up, but what is monitored says so.
3. Every valid request is checked as soon as it is read, each on its own
   (:meth:`GateService.check` never raises; it answers each within its budget).
4. While requests are being decided the loop goes on reading - during a transaction
   too - so a request's budget is spent judging, not waiting on the topic behind a slow
   request; at most twice the service's capacity is held in flight. One read is always
   pending, woken by the consumer's fetch as soon as records come (no polling: a poll
   would delay a request by up to its period and wake the event loop, taking the
   interpreter from the judge thread, many times per decision); a read still pending
   when the requests held are all published is the next batch's read.
5. Each partition's requests publish in offset order: whenever no transaction is under
   way, every partition's decided requests ahead of its first undecided one go in one
   transaction - every reply (:class:`~streamproc.contracts.gate_events.GateReply` JSON, key and
   ``correlation-id`` header the request's correlation id, the trace headers), every
   monitored record (verdict, flag, outcome, audit, review item), every dead letter and
   the input offsets up to them. A ``read_committed`` caller sees a reply only if its
   verdict is published, and each verdict once. A request not yet published when the
   loop fails or stops has its check cancelled and its offset uncommitted: whoever
   reads the partition next decides it.

With ``gate.kafka_reply = "immediate"`` each reply (and GateError reply) is sent as soon
as its request is decided, by a producer of its own outside the transaction
(:class:`~streamproc.gate.kafka.immediate.ImmediateReplies`); steps 4 and 5 carry the
rest, and the reply only where it could not be sent at once.

A bad request never stops the loop: one with no usable ``reply-topic`` or
``correlation-id`` (absent, not a legal topic, an internal or a missing topic) becomes a
dead letter (``schema_violation``, saying which header); one whose reply topic is not
allowed (:class:`~streamproc.gate.kafka.access.ReplyTopicRule`) a dead letter
``reply_topic_refused``, nothing written to that topic; one with a reply route but no
valid ``authorization`` token, or a token whose caller may not see the answer's tenant
(:class:`~streamproc.gate.kafka.access.KafkaCallerCheck`), gets an ``unauthorized`` /
``forbidden`` GateError reply and an ``unauthorized`` dead letter; one with a bad budget
or a bad event gets a :class:`~streamproc.contracts.gate_events.GateError` reply and a dead letter
with its original bytes. A reply goes out when its request and every
request before it on its partition are decided: requests on one partition mostly have
budgets that end in the order they were sent; a caller mixing very different budgets on
one partition sees a short one answered when the long ones before it are.
"""

from __future__ import annotations

import asyncio
import time
from asyncio import FIRST_COMPLETED
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import structlog
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.gate_events import (
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    GateError,
)
from streamproc.gate.kafka._requests import (
    ERROR_CODES,
    Batch,
    Checked,
    Handled,
    HeldRequest,
    RefusedRequest,
    Route,
    decided_heads,
    first_header,
    heads,
    malformed,
    refusal_code,
    reply_record,
)
from streamproc.gate.kafka.access import AUTHORIZATION_HEADER, KafkaCallerCheck, ReplyTopicRule
from streamproc.gate.kafka.immediate import ImmediateReplies
from streamproc.gate.kafka.reply_topics import ReplyTopics, unusable_reply_topic
from streamproc.gate.options import GateSettings
from streamproc.gate.request import GateRequest
from streamproc.gate.sensor import GateSensor, NullGateSensor
from streamproc.gate.service import GateService
from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
from streamproc.kafka.publisher import PublishFailed
from streamproc.kafka.topics import DEAD_LETTER_MAX_BYTES
from streamproc.telemetry.trace_headers import read_trace_context, report_dropped
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.record import OutboundRecord

__all__ = ["MAX_CORRELATION_ID_BYTES", "GateKafkaOptions", "GateRequestLoop"]

log = structlog.get_logger(__name__)

MAX_CORRELATION_ID_BYTES = 255
"""A uuid4 is 32 to 36 characters; anything longer than this is not an id."""
_POLL_MS = 200
"""A read waits this long at most for requests (it returns as soon as some come)."""
_IN_FLIGHT_FACTOR = 2
"""Records held in flight at most this many times the service's capacity (beyond it the
service would shed them anyway; the rest wait on the topic, their age counted)."""
_REPLY_MARGIN_BYTES = 4096
"""Room kept under the reply topic's record limit for the record's key and headers."""


@dataclass(frozen=True, slots=True)
class GateKafkaOptions:
    """What the request loop is told besides what every consumer loop is
    (:class:`~streamproc.kafka.consumer.KafkaLoopOptions`); the composition root builds it
    once (:func:`streamproc.wiring.gate_kafka_options`)."""

    gate: GateSettings
    max_message_bytes: int
    """``topics.output_max_message_bytes``: a reply's limit (less room for its key and
    headers)."""
    reply_rule: ReplyTopicRule
    """Where replies may go."""


class GateRequestLoop(ConsumerLoop):
    """Serve gate requests from Kafka with ``service``; see the module docstring.

    ``clock``: wall-clock seconds since the epoch, compared with the records' timestamps.
    """

    def __init__(
        self,
        kafka: KafkaLoopOptions,
        options: GateKafkaOptions,
        service: GateService,
        *,
        client_options: Mapping[str, Any] | None = None,
        sensor: GateSensor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        gate = options.gate
        self._options = options
        self._capacity = gate.batch_max * gate.max_pending_factor
        super().__init__(
            kafka,
            name="gate",
            topic=gate.requests_topic,
            client_options=client_options,
            consumer_options={
                # No more than the service holds at once: beyond, it would shed them.
                "max_poll_records": self._capacity,
                "max_partition_fetch_bytes": max(1024 * 1024, kafka.worker.max_event_bytes + 65536),
            },
            producer_options={
                "max_request_size": DEAD_LETTER_MAX_BYTES + 65536,
                # A reply waits for nothing: no linger; and a transaction begun while the
                # last one's markers are still being written is refused for a moment
                # (CONCURRENT_TRANSACTIONS) and retried after this, not aiokafka's 100 ms.
                "linger_ms": 0,
                "retry_backoff_ms": 10,
            },
        )
        self._service = service
        self._reply_reserve_ms = gate.reply_reserve_ms
        self._immediate: ImmediateReplies | None = None
        self._read: asyncio.Task[tuple[Batch, int]] | None = None
        """The pending read (module docstring, step 4), with the generation it was read in;
        whoever takes its records clears it (a read that ends keeps its records here until
        then)."""
        self._sensor: GateSensor = sensor or NullGateSensor()
        self._clock = clock
        self._outputs = kafka.outputs
        self._max_reply_bytes = options.max_message_bytes - _REPLY_MARGIN_BYTES
        self.reply_topics = ReplyTopics(self._cluster_topics)
        self._reply_rule = options.reply_rule
        self._access = KafkaCallerCheck.for_gate(gate)
        self.answered = 0
        self.refused = 0

    async def run(self) -> None:
        """As :meth:`ConsumerLoop.run`, with the producer of immediate replies around it."""
        if self._options.gate.kafka_reply == "immediate":
            self._immediate = ImmediateReplies(
                {
                    **self._client_options,
                    "bootstrap_servers": self._kafka.connection.bootstrap_servers,
                }
            )
        try:
            if self._immediate is not None:
                await self._immediate.start()
            await super().run()
        finally:
            read, self._read = self._read, None
            if read is not None:  # the consumer has stopped: it ends with no records
                read.cancel()
                await asyncio.gather(read, return_exceptions=True)
            if self._immediate is not None:
                await self._immediate.stop()

    async def _cluster_topics(self) -> set[str]:
        return set(await self._consumer.topics())

    # ------------------------------------------------------------------ one batch

    async def _step(self) -> None:
        try:
            batch, read_at = await self._reading(self._capacity)
        finally:
            self._read = None
        if not batch:
            return
        async with self._lock:
            if self._admit(batch, read_at):
                await self._decide_and_publish(batch)

    def _reading(self, max_records: int) -> asyncio.Task[tuple[Batch, int]]:
        """The pending read, started if there is none. It is never cancelled while the
        loop runs (aiokafka would count a cancelled read as a poll still under way)."""
        if self._read is None:
            self._read = asyncio.create_task(self._read_batch(max_records))
        return self._read

    async def _read_batch(self, max_records: int) -> tuple[Batch, int]:
        """Records as soon as some come (or none after ``_POLL_MS``), and the generation
        they were read in, taken with no await in between (:meth:`_admit`)."""
        batch = await self._consumer.getmany(timeout_ms=_POLL_MS, max_records=max_records)
        return batch, self._read_epoch

    async def _decide_and_publish(self, batch: Batch) -> None:
        """Decide ``batch`` and the requests read while it is decided, publishing each
        partition's decided requests in offset order (module docstring, steps 4 and 5).
        The chain ends, and the lock is let go, once every request read is published; it
        reads no more when a rebalance waits for the lock or the loop is stopping."""
        held: dict[TopicPartition, deque[HeldRequest]] = {}
        self._hold(batch, held)
        publishing: asyncio.Task[None] | None = None
        try:
            while True:
                if publishing is None:
                    decided = decided_heads(held)
                    if decided:
                        publishing = asyncio.create_task(self._publish(decided))
                    elif not any(held.values()):
                        return
                await self._read_until_change(held, publishing)
                if publishing is not None and publishing.done():
                    published, publishing = publishing, None
                    published.result()  # a failed transaction stops the loop
        finally:
            fates = [each.fate for queue in held.values() for each in queue]
            unfinished = [task for task in (publishing, *fates) if task is not None]
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)

    def _hold(self, batch: Batch, held: dict[TopicPartition, deque[HeldRequest]]) -> None:
        """Start deciding every record of ``batch``, each behind its partition's."""
        now_wall, now_mono = self._clock(), time.monotonic()
        for tp in sorted(batch):
            queue = held.setdefault(tp, deque())
            for record in batch[tp]:
                fate = asyncio.create_task(self._handle_one(record, now_wall, now_mono))
                queue.append(HeldRequest(tp, record.offset, fate))

    async def _read_until_change(
        self, held: dict[TopicPartition, deque[HeldRequest]], publishing: asyncio.Task[None] | None
    ) -> None:
        """Read on, starting each batch read while fewer than ``_IN_FLIGHT_FACTOR`` x
        capacity requests are held, until the transaction under way ends or (none under
        way) a partition's oldest request is decided. A batch not admitted (put back or
        dropped by a rebalance) ends the reading here; so does a rebalance waiting for
        the lock, or the loop stopping (a read already done then waits for the next
        batch)."""
        reading = True
        while True:
            watched: set[asyncio.Future[Any]] = (
                {publishing} if publishing is not None else set(heads(held))
            )
            if not watched or any(task.done() for task in watched):
                return
            room = self._capacity * _IN_FLIGHT_FACTOR - sum(len(q) for q in held.values())
            if reading and room > 0 and not (self._stopping.is_set() or self._rebalance_waiting):
                read = self._reading(min(room, self._capacity))
                if read.done():
                    self._read = None
                    more, read_at = read.result()  # a failed read stops the loop, as in _step
                    if more:
                        self.last_poll_at = time.monotonic()
                        if self._admit(more, read_at):
                            self._hold(more, held)
                        else:
                            reading = False
                    continue
                watched.add(read)
            await asyncio.wait(watched, return_when=FIRST_COMPLETED)

    async def _publish(self, decided: Sequence[HeldRequest]) -> None:
        """One transaction for ``decided`` (each partition's decided oldest requests),
        then their accounting."""
        handled = [each.fate.result() for each in decided]
        offsets: dict[TopicPartition, int] = {}
        for each in decided:
            offsets[each.tp] = max(offsets.get(each.tp, 0), each.offset + 1)
        try:
            await self._publisher.publish(self.outbound(handled), offsets)
        except PublishFailed:  # the loop stops: what is counted must say why
            self._sensor.publish_failed(path="kafka")
            raise
        self.watch.progress.acknowledged(offsets, time.monotonic())
        self._committed(handled)

    async def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[Handled]:
        """Each record's fate, in order: checked (concurrently) or refused."""
        now_wall, now_mono = self._clock(), time.monotonic()
        return list(
            await asyncio.gather(
                *(self._handle_one(record, now_wall, now_mono) for record in records)
            )
        )

    async def _handle_one(
        self, record: ConsumerRecord[bytes, bytes], now_wall: float, now_mono: float
    ) -> Handled:
        """``record`` decided, its reply sent at once where the gate does so (never raises
        but for cancellation)."""
        handled = await self._decide(record, now_wall, now_mono)
        if self._immediate is None:
            return handled
        reply = self._reply_of(handled)
        if reply is not None and await self._immediate.send(reply):
            return replace(handled, replied=True)
        return handled

    async def _decide(
        self, record: ConsumerRecord[bytes, bytes], now_wall: float, now_mono: float
    ) -> Handled:
        """``record`` checked, or why it is refused."""
        taken = await self._take(record, now_wall, now_mono)
        if isinstance(taken, RefusedRequest):
            return taken
        request, route = taken
        try:
            result = await self._service.check(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - check() never raises; if it does, this request alone pays
            log.error("gate_check_raised", error=repr(exc))
            return RefusedRequest(
                Rejection(DeadLetterReason.PROCESSING_ERROR, f"not checked: {exc!r}"),
                request.origin,
                request.body,
                request.headers,
                route,
                GateError(error="not_ready", detail="the gate could not decide"),
            )
        return Checked(request, route, result)

    async def _take(
        self, record: ConsumerRecord[bytes, bytes], now_wall: float, now_mono: float
    ) -> tuple[GateRequest, Route] | RefusedRequest:
        """The request of ``record`` and its route, or why it is refused."""
        origin = MessageOrigin(record.topic, record.partition, record.offset, record.key)
        headers = list(record.headers or ())
        bounded = read_trace_context(headers)
        ids, trace_headers = bounded.ids, bounded.handed_on
        report_dropped(
            bounded.dropped,
            partial(self._sensor.trace_context_dropped, path="kafka"),
            partition=record.partition,
            offset=record.offset,
        )

        def refused(
            reason: DeadLetterReason, detail: str, route: Route | None, error: GateError | None
        ) -> RefusedRequest:
            rejection = Rejection(reason, detail)
            return RefusedRequest(rejection, origin, record.value, trace_headers, route, error)

        route = await self._route(headers)
        if isinstance(route, Rejection):
            return RefusedRequest(route, origin, record.value, trace_headers, None, None)
        caller = self._access.caller(first_header(headers, AUTHORIZATION_HEADER))
        if isinstance(caller, GateError):
            return refused(DeadLetterReason.UNAUTHORIZED, caller.detail, route, caller)
        budget = self._service.budget(first_header(headers, BUDGET_HEADER))
        if isinstance(budget, GateError):
            return refused(DeadLetterReason.SCHEMA_VIOLATION, budget.detail, route, budget)
        budget = max(0.0, budget - self._reply_reserve_ms)
        answer = self._service.parse(record.value)
        if isinstance(answer, Rejection):
            error = GateError(
                error=ERROR_CODES.get(answer.reason, "bad_request"), detail=answer.error[:2000]
            )
            return RefusedRequest(answer, origin, record.value, trace_headers, route, error)
        forbidden = self._access.tenant_refusal(caller, answer.tenant)
        if forbidden is not None:
            return refused(DeadLetterReason.UNAUTHORIZED, forbidden.detail, route, forbidden)
        spent_s = max(0.0, now_wall - record.timestamp / 1000) if record.timestamp > 0 else 0.0
        traceparent = first_header(headers, "traceparent") if ids is not None else None
        request = GateRequest(
            body=record.value or b"",
            answer=answer,
            budget_ms=budget,
            arrived=now_mono - spent_s,
            origin=origin,
            headers=trace_headers,
            trace_id=ids[0] if ids is not None else None,
            traceparent=traceparent.decode("latin-1") if traceparent is not None else None,
            notes=bounded.notes,
        )
        return request, route

    async def _route(self, headers: Sequence[tuple[str, bytes | None]]) -> Route | Rejection:
        """The reply's route, or why the request has none: a missing or malformed header,
        or a topic no reply may go to (``gate.reply_topic_pattern``, never one of ours)."""
        raw_topic = first_header(headers, REPLY_TOPIC_HEADER)
        correlation = first_header(headers, CORRELATION_ID_HEADER)
        if raw_topic is None or correlation is None:
            missing = [
                name
                for name, value in (
                    (REPLY_TOPIC_HEADER, raw_topic),
                    (CORRELATION_ID_HEADER, correlation),
                )
                if value is None
            ]
            return malformed(
                f"gate request without the {' and '.join(missing)} header: no reply possible"
            )
        if not 0 < len(correlation) <= MAX_CORRELATION_ID_BYTES:
            return malformed(
                f"gate request with a {CORRELATION_ID_HEADER} header of {len(correlation)} "
                f"bytes (1 to {MAX_CORRELATION_ID_BYTES} expected): no reply possible"
            )
        topic = raw_topic.decode("latin-1")
        unusable = unusable_reply_topic(topic)
        if unusable is None:
            refusal = self._reply_rule.refusal(topic)
            if refusal is not None:
                return Rejection(
                    DeadLetterReason.REPLY_TOPIC_REFUSED,
                    f"gate request whose {refusal}: nothing written there",
                )
        if unusable is None and not await self.reply_topics.exists(topic):
            unusable = f"reply-topic {topic!r} does not exist"
        if unusable is not None:
            return malformed(f"gate request whose {unusable}: no reply possible")
        return Route(topic, correlation)

    # ------------------------------------------------------------------ records

    def outbound(self, handled: Sequence[Handled]) -> list[OutboundRecord]:
        """Replies, monitored records and dead letters of one batch."""
        records: list[OutboundRecord] = []
        now = datetime.fromtimestamp(self._clock(), UTC)
        for each in handled:
            reply = None if each.replied else self._reply_of(each)
            if reply is not None:
                records.append(reply)
            if isinstance(each, Checked):
                records += each.result.records
                continue
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

    def _reply_of(self, handled: Handled) -> OutboundRecord | None:
        """The reply ``handled`` gets, if it has a route to one."""
        if isinstance(handled, Checked):
            return self._reply(handled)
        if handled.route is None or handled.error is None:
            return None
        return reply_record(handled.route, handled.error.model_dump_json(), handled.headers)

    def _reply(self, checked: Checked) -> OutboundRecord:
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
        return reply_record(checked.route, value, headers)

    def _committed(self, handled: Sequence[Handled]) -> None:
        """After the transaction: the sensor and the counts."""
        for each in handled:
            try:
                if isinstance(each, Checked):
                    self.answered += 1
                    self._sensor.decided(each.result.reply, path="kafka")
                else:
                    self.refused += 1
                    self._sensor.refused(refusal_code(each), path="kafka")
            except Exception:  # committed already: report it and go on
                log.exception("gate_sensor_failed")
