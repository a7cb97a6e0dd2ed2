"""What the gate's request loop holds between reading a request and publishing its
outcome: the reply route, a checked or refused request, a request whose check is still
running, and the small functions over them."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.gate_events import CORRELATION_ID_HEADER, GateError, GateErrorCode
from streamproc.gate.request import GateRequest, GateResult
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord

__all__ = [
    "ERROR_CODES",
    "Batch",
    "Checked",
    "Handled",
    "HeldRequest",
    "RefusedRequest",
    "Route",
    "decided_heads",
    "first_header",
    "heads",
    "malformed",
    "refusal_code",
    "reply_record",
]

ERROR_CODES: dict[DeadLetterReason, GateErrorCode] = {
    DeadLetterReason.BAD_JSON: "bad_json",
    DeadLetterReason.SCHEMA_VIOLATION: "schema_violation",
    DeadLetterReason.OVERSIZED: "oversized",
    DeadLetterReason.EVENT_TIME_OUT_OF_RANGE: "event_time_out_of_range",
}
"""The reply's error code of a request refused as its dead letter's reason says."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request's reply goes."""

    topic: str
    correlation_id: bytes


@dataclass(frozen=True, slots=True)
class Checked:
    request: GateRequest
    route: Route
    result: GateResult
    replied: bool = False
    """Its reply has been sent already (``gate.kafka_reply = "immediate"``)."""


@dataclass(frozen=True, slots=True)
class RefusedRequest:
    """A request not checked: its dead letter, and a GateError reply where it has a route."""

    rejection: Rejection
    origin: MessageOrigin
    value: bytes | None
    headers: OutHeaders
    route: Route | None
    error: GateError | None
    replied: bool = False


Handled = Checked | RefusedRequest
Batch = Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class HeldRequest:
    """A request record read and not yet published; its check runs as a task."""

    tp: TopicPartition
    offset: int
    fate: asyncio.Task[Handled]


def heads(held: Mapping[TopicPartition, deque[HeldRequest]]) -> set[asyncio.Task[Handled]]:
    """Each partition's oldest held request's check."""
    return {queue[0].fate for queue in held.values() if queue}


def decided_heads(held: Mapping[TopicPartition, deque[HeldRequest]]) -> list[HeldRequest]:
    """Each partition's decided requests ahead of its first undecided one, taken out of
    ``held``: what can be published now, offsets committed up to it."""
    decided: list[HeldRequest] = []
    for queue in held.values():
        while queue and queue[0].fate.done():
            decided.append(queue.popleft())
    return decided


def refusal_code(refused: RefusedRequest) -> GateErrorCode:
    """The refusal's code: its reply's, else (no reply route) its dead letter's."""
    if refused.error is not None:
        return refused.error.error
    return ERROR_CODES.get(refused.rejection.reason, "bad_request")


def malformed(detail: str) -> Rejection:
    return Rejection(DeadLetterReason.SCHEMA_VIOLATION, detail)


def reply_record(route: Route, value: str, headers: OutHeaders) -> OutboundRecord:
    trace = tuple((name, raw) for name, raw in headers if name != CORRELATION_ID_HEADER)
    return OutboundRecord(
        topic=route.topic,
        key=route.correlation_id,
        value=value.encode(),
        headers=((CORRELATION_ID_HEADER, route.correlation_id), *trace),
    )


def first_header(headers: Sequence[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The first header ``name`` (case-insensitive) with a value."""
    for key, value in headers:
        if value is not None and key.lower() == name:
            return value
    return None
