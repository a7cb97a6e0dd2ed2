"""``GET /v1/stream``: the gate over a WebSocket, checking an answer while it streams.

The protocol is :mod:`streamproc.contracts.gate_stream_events`'s. One connection is one
answer:

1. The handshake is accepted, then refused at once (one ``error`` message and a close)
   without a valid bearer token (``unauthorized``), while the service is not ready
   (``not_ready``) or with ``gate.max_streams`` streams open (``busy``).
2. The first message must be ``start``: its event goes through the intake as
   ``/v1/check``'s body does (JSON, schema, size, event time), its tenant must be one
   the token names (``forbidden``), its budget is read as ``X-Budget-Ms`` is.
3. Deltas are read as they come, by one task; another checks the sentences they
   complete (:class:`~streamproc.gate.answer_stream.AnswerStream`) and sends each
   sentence's message in order. Reading never waits for a check.
4. ``end`` - or nothing for ``gate.stream_idle_s`` (close 4000), or a stream open for
   ``gate.stream_max_s`` (close 4001) - ends the answer: the sentence checks under way
   finish, the whole answer is decided once, monitored, and the ``final`` is sent
   (close 1000).

Once a stream has started, its answer is monitored exactly once, however it ends: a bad
message mid-stream (``error``, then close) and a client that disappears still get the
answer so far decided and its records published; only a stream refused before its start
leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
from aiohttp import WSMsgType, web
from pydantic import TypeAdapter, ValidationError

from streamproc.contracts.events import AnswerEvent
from streamproc.contracts.gate_events import GateError, GateErrorCode
from streamproc.contracts.gate_stream_events import (
    STREAM_CLOSE_CODES,
    STREAM_ENDED_IDLE,
    STREAM_ENDED_TOO_LONG,
    StreamClientMessage,
    StreamDelta,
    StreamEnd,
    StreamError,
    StreamErrorCode,
    StreamStart,
)
from streamproc.gate.answer_stream import AnswerStream, StreamTooLarge
from streamproc.gate.http.auth import Caller
from streamproc.gate.outbox import Outbox
from streamproc.gate.refusal_codes import refusal_code
from streamproc.gate.request import GateRequest, GateResult, http_origin
from streamproc.gate.sensor import GateSensor
from streamproc.gate.service import GateService
from streamproc.telemetry.trace_headers import read_trace_context, report_dropped
from streamproc.verdicts.dead_letter import Rejection

__all__ = ["StreamEndpoint", "StreamLimits"]

log = structlog.get_logger(__name__)

_MESSAGES: TypeAdapter[StreamClientMessage] = TypeAdapter(StreamClientMessage)
_PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})
_FRAME_OVERHEAD = 64 * 1024
"""Room for a start message's wrapping around its event, past the intake limit."""
_NORMAL_CLOSE = 1000


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """``gate.max_streams``, ``stream_idle_s`` and ``stream_max_s``."""

    max_streams: int
    idle_s: float
    max_s: float


class _StreamRefusal(Exception):
    def __init__(self, code: StreamErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(slots=True)
class _Ending:
    """How the reading ended."""

    close_code: int = _NORMAL_CLOSE
    error: _StreamRefusal | None = None
    gone: bool = False


class StreamEndpoint:
    """The WebSocket handler; see the module doc."""

    def __init__(
        self,
        service: GateService,
        *,
        authenticate: Callable[[web.Request], Caller | None],
        sensor: GateSensor,
        outbox: Outbox | None,
        publish: bool,
        limits: StreamLimits,
    ) -> None:
        self._service = service
        self._authenticate = authenticate
        self._sensor = sensor
        self._outbox = outbox if publish else None
        self._limits = limits
        self._max_bytes = service.max_event_bytes
        self.open_streams = 0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """One streamed answer, from the handshake to the close."""
        opened = time.monotonic()
        ws = web.WebSocketResponse(
            max_msg_size=self._max_bytes + _FRAME_OVERHEAD, autoping=True, heartbeat=None
        )
        await ws.prepare(request)
        if self.open_streams >= self._limits.max_streams:
            await self._refuse(ws, _StreamRefusal("busy", "too many answers are streaming; retry"))
            return ws
        self.open_streams += 1
        self._sensor.streams(self.open_streams)
        try:
            await self._serve(ws, request, opened)
        finally:
            self.open_streams -= 1
            self._sensor.streams(self.open_streams)
        return ws

    async def _serve(self, ws: web.WebSocketResponse, request: web.Request, opened: float) -> None:
        caller = self._authenticate(request)
        try:
            if caller is None:
                raise _StreamRefusal(
                    "unauthorized", "a valid 'Authorization: Bearer <token>' header is required"
                )
            if not self._service.ready():
                raise _StreamRefusal("not_ready", "the gate is not ready (starting or stopping)")
            stream = await self._started(ws, request, caller, opened)
        except _StreamRefusal as refused:
            await self._refuse(ws, refused)
            return
        ending = await self._run(ws, stream, opened)
        await self._finish(ws, stream, ending)

    async def _started(
        self, ws: web.WebSocketResponse, request: web.Request, caller: Caller, opened: float
    ) -> AnswerStream:
        """The first message, which must be a valid ``start``, made into the stream."""
        message = await self._next(ws, self._limits.idle_s)
        if message is None:
            raise _StreamRefusal("protocol", "the stream closed before its start")
        if not isinstance(message, StreamStart):
            raise _StreamRefusal("protocol", f"the first message must be start, not {message.type}")
        body = json.dumps(message.event, ensure_ascii=False).encode("utf-8", "surrogatepass")
        answer = self._service.parse(body)
        if isinstance(answer, Rejection):
            raise _StreamRefusal(refusal_code(answer.reason), answer.error)
        assert isinstance(answer, AnswerEvent)
        if not caller.may_see(answer.tenant):
            raise _StreamRefusal(
                "forbidden",
                f"caller {caller.name!r} may not check answers of tenant {answer.tenant[:200]!r}",
            )
        budget = self._service.budget(None if message.budget_ms is None else str(message.budget_ms))
        if isinstance(budget, GateError):
            raise _StreamRefusal(budget.error, budget.detail)
        bounded = read_trace_context(
            [
                (name, value.encode("utf-8", "surrogateescape"))
                for name, value in request.headers.items()
                if name.lower() in _PROPAGATED
            ]
        )
        report_dropped(
            bounded.dropped,
            partial(self._sensor.trace_context_dropped, path="stream"),
            path="stream",
        )
        start = GateRequest(
            body=body,
            answer=answer,
            budget_ms=budget,
            arrived=opened,
            origin=http_origin(),
            headers=bounded.handed_on,
            trace_id=bounded.ids[0] if bounded.ids is not None else None,
            traceparent=request.headers.get("traceparent") if bounded.ids is not None else None,
            notes=bounded.notes,
        )
        try:
            return AnswerStream(
                self._service,
                start,
                message.event,
                policy=self._service.policy_for(answer.tenant),
                max_bytes=self._max_bytes,
                tracing=self._service.tracing,
            )
        except StreamTooLarge as exc:
            raise _StreamRefusal("oversized", str(exc)) from None

    async def _run(self, ws: web.WebSocketResponse, stream: AnswerStream, opened: float) -> _Ending:
        """Read until the answer ends, checking sentences beside the reading."""
        wake = asyncio.Event()
        stop = asyncio.Event()
        checker = asyncio.create_task(self._check_sentences(ws, stream, wake, stop))
        if stream.pending:
            wake.set()
        try:
            ending = await self._read(ws, stream, opened, wake)
        finally:
            stop.set()
            wake.set()
            # The check under way finishes (its budget bounds it); none starts after.
            await asyncio.shield(asyncio.gather(checker, return_exceptions=True))
        return ending

    async def _read(
        self, ws: web.WebSocketResponse, stream: AnswerStream, opened: float, wake: asyncio.Event
    ) -> _Ending:
        limits = self._limits
        closes_at = opened + limits.max_s
        while True:
            left = closes_at - time.monotonic()
            if left <= 0:
                return _Ending(close_code=STREAM_ENDED_TOO_LONG)
            try:
                message = await self._next(ws, min(limits.idle_s, left))
            except TimeoutError:
                if closes_at - time.monotonic() <= 0:
                    return _Ending(close_code=STREAM_ENDED_TOO_LONG)
                return _Ending(close_code=STREAM_ENDED_IDLE)
            except _StreamRefusal as refused:
                return _Ending(error=refused)
            if message is None:
                return _Ending(gone=True)
            if isinstance(message, StreamEnd):
                return _Ending()
            if isinstance(message, StreamStart):
                return _Ending(error=_StreamRefusal("protocol", "start was sent twice"))
            try:
                problem = _text_problem(message)
                if problem is not None:
                    return _Ending(error=_StreamRefusal("schema_violation", problem))
                if stream.add(message.text):
                    wake.set()
            except StreamTooLarge as exc:
                return _Ending(error=_StreamRefusal("oversized", str(exc)))

    async def _check_sentences(
        self,
        ws: web.WebSocketResponse,
        stream: AnswerStream,
        wake: asyncio.Event,
        stop: asyncio.Event,
    ) -> None:
        while not stop.is_set():
            await wake.wait()
            wake.clear()
            while stream.pending and not stop.is_set():
                for sentence in await stream.check():
                    await _send(ws, sentence.model_dump_json())

    async def _finish(
        self, ws: web.WebSocketResponse, stream: AnswerStream, ending: _Ending
    ) -> None:
        """The final: decided and monitored whatever the ending; sent unless the client
        is gone or the stream was refused mid-way."""
        outcome = await asyncio.shield(self._final(stream))
        if ending.gone:
            return
        if isinstance(outcome, _StreamRefusal):
            await self._refuse(ws, outcome)
            return
        if ending.error is not None:
            await self._refuse(ws, ending.error)
            return
        for text in outcome:
            await _send(ws, text)
        await ws.close(code=ending.close_code)

    async def _final(self, stream: AnswerStream) -> list[str] | _StreamRefusal:
        made = await stream.final()
        if isinstance(made, Rejection):
            return _StreamRefusal(refusal_code(made.reason), made.error)
        last, final, result = made
        self._keep(result)
        texts = [sentence.model_dump_json() for sentence in last]
        texts.append(final.model_dump_json())
        try:
            self._sensor.decided(
                result.reply.model_copy(update={"latency_ms": final.latency_ms}), path="stream"
            )
        except Exception:  # the decision stands; a metrics bug must not touch it
            log.exception("gate_sensor_failed")
        return texts

    def _keep(self, result: GateResult) -> None:
        """The final's records to the outbox (published by its task)."""
        outbox = self._outbox
        if outbox is None or not result.records:
            return
        if outbox.has_room():
            outbox.put(result.records)
        else:
            outbox.refuse(len(result.records))
            self._sensor.publish_failed(path="stream")

    async def _next(self, ws: web.WebSocketResponse, timeout_s: float) -> Any:
        """The next client message; None when the client is gone; :class:`_StreamRefusal` for
        one that is not a message; ``TimeoutError`` after ``timeout_s``."""
        received = await ws.receive(timeout=timeout_s)
        if received.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            return None
        if received.type is not WSMsgType.TEXT:
            raise _StreamRefusal("bad_json", "messages are JSON text frames")
        try:
            json.loads(received.data)
        except ValueError as exc:
            raise _StreamRefusal("bad_json", f"not valid JSON: {exc}") from None
        try:
            return _MESSAGES.validate_json(received.data)
        except ValidationError as exc:
            raise _StreamRefusal("schema_violation", _first_error(exc)) from None

    async def _refuse(self, ws: web.WebSocketResponse, refused: _StreamRefusal) -> None:
        code: GateErrorCode = "bad_request" if refused.code == "protocol" else refused.code
        self._sensor.refused(code, path="stream")
        log.debug("gate_stream_refused", code=refused.code, detail=refused.detail[:200])
        error = StreamError(error=refused.code, detail=refused.detail[:2000])
        await _send(ws, error.model_dump_json())
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.close(code=STREAM_CLOSE_CODES[refused.code], message=refused.code.encode())


async def _send(ws: web.WebSocketResponse, text: str) -> None:
    """Send unless the client is gone (then the message has nobody to read it)."""
    if ws.closed:
        return
    with contextlib.suppress(ConnectionError, RuntimeError):
        await ws.send_str(text)


def _text_problem(delta: StreamDelta) -> str | None:
    """What the intake would refuse in a delta: U+0000 or a lone surrogate."""
    if "\x00" in delta.text:
        return "a delta holds U+0000 (NUL)"
    try:
        delta.text.encode("utf-8")
    except UnicodeEncodeError:
        return "a delta holds a lone surrogate"
    return None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "message"
    return f"{where}: {first['msg']}"[:2000]
