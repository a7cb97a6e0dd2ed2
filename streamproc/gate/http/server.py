"""The gate over HTTP: ``POST /v1/check`` an answer event, get a decision within its budget.

A request is refused as early as the refusal can be known, so bad input costs as little
as possible (each refusal is a one-line :class:`~streamproc.contracts.gate_events.GateError`,
counted with ``sensor.refused``):

1. no or unknown ``Authorization: Bearer`` token: 401 (``WWW-Authenticate: Bearer``);
2. a Content-Type other than ``application/json``: 415;
3. a Content-Length over the intake limit (``worker.max_event_bytes``): 413,
   before a byte of the body is read; a body without a length (chunked) is read up to the
   limit plus one byte, never more, and refused the same way past it;
4. the service not ready (starting, closing): 503;
5. the body's bytes over the caller's share of bodies held at once
   (``gate.max_caller_body_bytes_in_flight``): 429 ``caller_busy``; over the total
   (``gate.max_body_bytes_in_flight``): 503 ``busy`` - both with ``Retry-After``, before a
   byte of the body is read, and the connection closed without reading the rest (so a
   caller over its share costs the gate no reading; :mod:`~streamproc.gate.body_budget`);
6. an event that fails intake (JSON, schema, event-time bounds - the worker's own
   :meth:`GateService.parse`): 400;
7. an answer of a tenant the caller's token does not name: 403;
8. a bad ``X-Budget-Ms``: 400.

A client sending ``Expect: 100-continue`` gets steps 1 to 4 in place of the ``100
Continue``, so a refused body is never sent at all. A refused body that is on its way is
drained and dropped (aiohttp's lingering close, at most 10 s) so the client reads the
refusal rather than a reset connection; it is never buffered.

Then the service decides (it never raises), the decision's monitored records go to the
outbox (:mod:`~streamproc.gate.outbox`, published by a background task: the reply never
waits on the broker), and the reply is sent. With the outbox full, the request is
answered at once by its tenant's policy (``OUTBOX_FULL``), not judged. Any other error
(404, 405, a bug) is one line of JSON too, never a traceback.

The latency clock starts when the request's headers are parsed (the outermost
middleware, before the body is read) and stops when the reply has been written to the
socket: ``latency_ms`` is taken just before the reply is serialised, the
``streamproc_gate_decision_seconds`` histogram once it is written. ``/readyz`` is 503
with a JSON ``reason`` while the service is not ready or the outbox cannot publish
(``broker_unavailable``) or is full (``outbox_full``).

With ``gate.tls_cert`` and ``tls_key`` the server speaks HTTPS only.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Awaitable, Callable
from functools import partial
from http import HTTPStatus

import structlog
from aiohttp import HttpVersion11, hdrs, web

from streamproc.contracts.events import AnswerEvent, UnverifiedReason
from streamproc.contracts.gate_events import BUDGET_HEADER, GateError, GateErrorCode
from streamproc.contracts.gate_stream_events import STREAM_PATH
from streamproc.gate.body_budget import BodyBudget, Held
from streamproc.gate.http.auth import Caller, Callers, callers_for
from streamproc.gate.http.stream_endpoint import StreamEndpoint, StreamLimits
from streamproc.gate.options import GateSettings
from streamproc.gate.outbox import Outbox
from streamproc.gate.refusal_codes import refusal_code
from streamproc.gate.request import GateRequest, GateResult, http_origin
from streamproc.gate.sensor import GateSensor
from streamproc.gate.service import GateService
from streamproc.telemetry.trace_headers import read_trace_context, report_dropped
from streamproc.web.limits import HttpLimits, head_arrived
from streamproc.web.server import AppServer
from streamproc.web.tls import server_tls_context

__all__ = ["CHECK_PATH", "GateServer", "GateTlsError", "tls_context"]

log = structlog.get_logger(__name__)

CHECK_PATH = "/v1/check"
_JSON = "application/json"
_MAX_DETAIL = 2000
_STATUS: dict[GateErrorCode, int] = {
    "bad_json": 400,
    "schema_violation": 400,
    "event_time_out_of_range": 400,
    "bad_budget": 400,
    "bad_request": 400,
    "oversized": 413,
    "unauthorized": 401,
    "forbidden": 403,
    "unsupported_media_type": 415,
    "not_ready": 503,
    "busy": 503,
    "caller_busy": 429,
}
_RETRY_AFTER_S = "1"
_ARRIVED = web.RequestKey("streamproc.gate.arrived", float)
"""The request's key for the time its headers were parsed (see :func:`_arrival`)."""
_PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class GateTlsError(ValueError):
    """The TLS settings cannot make a server: one of cert and key without the other, or
    files that do not load."""


class _Refusal(Exception):
    """Raised inside the check handler to answer a :class:`GateError`."""

    def __init__(self, code: GateErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class GateServer(AppServer):
    """``POST /v1/check``, ``GET /v1/stream`` (a WebSocket:
    :mod:`~streamproc.gate.http.stream_endpoint`), ``GET /healthz`` and ``GET /readyz``
    on ``gate.host`` and ``port`` (0: the OS picks; see :attr:`port`); see the module doc.

    Raises :class:`GateTlsError` or :class:`~streamproc.web.token_file.TokensFileError`
    when the settings cannot make a server, so a bad deployment fails at startup."""

    def __init__(
        self,
        gate: GateSettings,
        service: GateService,
        *,
        sensor: GateSensor,
        outbox: Outbox | None,
    ) -> None:
        super().__init__(
            host=gate.host,
            port=gate.port,
            ssl_context=tls_context(gate),
            limits=HttpLimits.from_settings(gate.http),
        )
        self._service = service
        self._sensor = sensor
        self._outbox = outbox
        self._publish = gate.publish
        self._callers: Callers | None = callers_for(gate)
        # The intake limit GateService.parse applies (worker.max_event_bytes): checked
        # here before the body is read.
        self._max_bytes = service.max_event_bytes
        self._bodies = BodyBudget(
            max_bytes=gate.max_body_bytes_in_flight,
            max_caller_bytes=gate.max_caller_body_bytes_in_flight,
        )
        self.streams = StreamEndpoint(
            service,
            authenticate=self._authenticate,
            sensor=sensor,
            outbox=outbox,
            publish=gate.publish,
            limits=StreamLimits(gate.max_streams, gate.stream_idle_s, gate.stream_max_s),
        )

    def _application(self) -> web.Application:
        app = web.Application(middlewares=[_arrival, _json_errors])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_post(CHECK_PATH, self._check, expect_handler=self._expect)
        app.router.add_get(STREAM_PATH, self.streams.handle)
        return app

    # ------------------------------------------------------------------ probes

    async def _healthz(self, _: web.Request) -> web.Response:
        return _json(200, '{"status":"ok"}')

    async def _readyz(self, _: web.Request) -> web.Response:
        reason = None if self._service.ready() else "service_not_ready"
        outbox = self._outbox
        if reason is None and outbox is not None:
            reason = outbox.unready_reason()
        if reason is None:
            return _json(200, '{"status":"ready"}')
        state: dict[str, object] = {"status": "not_ready", "reason": reason}
        if outbox is not None:
            state["outbox_records"] = outbox.records
            state["outbox_oldest_s"] = round(outbox.oldest_age_s(), 3)
        return _json(503, json.dumps(state, separators=(",", ":")))

    # ------------------------------------------------------------------ a check

    async def _check(self, request: web.Request) -> web.StreamResponse:
        arrived: float = request.get(_ARRIVED) or time.monotonic()
        held: Held | None = None
        try:
            caller = self._from_headers(request)
            held = self._hold_body(request, caller)
            gate_request = await self._admit(request, caller, arrived)
            result = await self._decide(gate_request)
            return await self._send(request, result, arrived)
        except _Refusal as refused:
            if refused.code in ("busy", "caller_busy"):
                # An over-budget body is not read, not even to drop it (aiohttp's
                # lingering close): the connection closes once the reply is written, and
                # a client still sending may see a reset instead of the reply.
                request.protocol._lingering_time = 0.0
            return self._refuse(refused.code, refused.detail)
        finally:
            if held is not None:
                self._bodies.release(held)

    def _hold_body(self, request: web.Request, caller: Caller) -> Held:
        """Reserve the body's bytes (its Content-Length; the intake limit when chunked)
        until the reply is sent, or :class:`_Refusal` (step 5)."""
        size = request.content_length
        if size is None:
            size = self._max_bytes
        held = self._bodies.reserve(caller.name, max(1, size))
        if held == "caller_busy":
            raise _Refusal(
                "caller_busy",
                f"caller {caller.name!r} already has "
                f"{self._bodies.caller_bytes(caller.name)} bytes of bodies in flight (limit "
                f"{self._bodies.max_caller_bytes}); retry later",
            )
        if held == "busy":
            raise _Refusal(
                "busy",
                f"the gate holds {self._bodies.held} bytes of bodies (limit "
                f"{self._bodies.max_bytes}); retry later",
            )
        return held

    async def _decide(self, gate_request: GateRequest) -> GateResult:
        """The service's decision, its records kept in the outbox; with the outbox full,
        the policy's at once (``OUTBOX_FULL``) and no record kept."""
        outbox = self._outbox
        if outbox is None or not self._publish:
            return await self._service.check(gate_request)
        if not outbox.has_room():
            result = self._service.unchecked(gate_request, UnverifiedReason.OUTBOX_FULL)
            outbox.refuse(len(result.records))
            self._sensor.publish_failed(path="http")
            return result
        result = await self._service.check(gate_request)
        outbox.put(result.records)
        return result

    async def _send(
        self, request: web.Request, result: GateResult, arrived: float
    ) -> web.StreamResponse:
        """Write the reply now: ``latency_ms`` read just before it is serialised, the
        histogram observed once it is written - the caller's view, near enough."""
        reply = result.reply.model_copy(
            update={"latency_ms": max(0.0, (time.monotonic() - arrived) * 1000)}
        )
        response = _json(200, reply.model_dump_json())
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError as exc:  # the caller left: nothing to write to
            log.debug("gate_reply_not_delivered", error=repr(exc)[:200])
        sent_ms = max(0.0, (time.monotonic() - arrived) * 1000)
        try:
            self._sensor.decided(reply.model_copy(update={"latency_ms": sent_ms}), path="http")
        except Exception:  # the reply is out; a metrics bug must not touch it
            log.exception("gate_sensor_failed")
        return response

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: refuse on the headers alone, so a body that would be
        refused (no token, not JSON, too large) is never even sent."""
        try:
            self._from_headers(request)
        except _Refusal as refused:
            return self._refuse(refused.code, refused.detail)
        if request.version != HttpVersion11:
            return None
        expect = request.headers.get(hdrs.EXPECT, "")
        if expect.lower() != "100-continue":
            return _json(417, _error_body(417, f"unknown Expect: {expect[:100]!r}"))
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the response proper has not started
        return None

    def _from_headers(self, request: web.Request) -> Caller:
        """The caller, if the headers alone do not refuse the request (steps 1 to 4)."""
        caller = self._authenticate(request)
        if caller is None:
            raise _Refusal(
                "unauthorized", "a valid 'Authorization: Bearer <token>' header is required"
            )
        if request.content_type.lower() != _JSON:
            raise _Refusal(
                "unsupported_media_type",
                f"Content-Type must be {_JSON}, got {request.content_type[:100]!r}",
            )
        length = request.content_length
        if length is not None and length > self._max_bytes:
            raise _Refusal("oversized", _too_large(length, self._max_bytes))
        if not self._service.ready():
            raise _Refusal("not_ready", "the gate is not ready (starting or stopping)")
        return caller

    async def _admit(self, request: web.Request, caller: Caller, arrived: float) -> GateRequest:
        """The request to decide on, or :class:`_Refusal` - steps 6 to 8 of the module doc."""
        body = await self._read_body(request)
        answer = self._service.parse(body)
        if not isinstance(answer, AnswerEvent):
            raise _Refusal(refusal_code(answer.reason), answer.error)
        if not caller.may_see(answer.tenant):
            raise _Refusal(
                "forbidden",
                f"caller {caller.name!r} may not check answers of tenant {answer.tenant[:200]!r}",
            )
        budget = self._service.budget(request.headers.get(BUDGET_HEADER))
        if isinstance(budget, GateError):
            raise _Refusal(budget.error, budget.detail)
        bounded = read_trace_context(_trace_headers(request))
        report_dropped(
            bounded.dropped,
            partial(self._sensor.trace_context_dropped, path="http"),
            path="http",
        )
        ids, trace_headers = bounded.ids, bounded.handed_on
        return GateRequest(
            body=body,
            answer=answer,
            budget_ms=budget,
            arrived=arrived,
            origin=http_origin(),
            headers=trace_headers,
            trace_id=ids[0] if ids is not None else None,
            traceparent=request.headers.get("traceparent") if ids is not None else None,
            notes=bounded.notes,
        )

    def _authenticate(self, request: web.Request) -> Caller | None:
        if self._callers is None:
            return None
        scheme, _, token = request.headers.get(hdrs.AUTHORIZATION, "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._callers.authenticate(token.strip())

    async def _read_body(self, request: web.Request) -> bytes:
        """The body, reading at most one byte past the limit (then :class:`_Refusal`)."""
        cap = self._max_bytes + 1
        chunks: list[bytes] = []
        size = 0
        while size < cap:
            chunk = await request.content.read(cap - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > self._max_bytes:
            raise _Refusal("oversized", _too_large(None, self._max_bytes))
        return b"".join(chunks)

    def _refuse(self, code: GateErrorCode, detail: str) -> web.Response:
        self._sensor.refused(code, path="http")
        log.debug("gate_request_refused", code=code, detail=detail[:200])
        error = GateError(error=code, detail=detail[:_MAX_DETAIL])
        response = _json(_STATUS[code], error.model_dump_json())
        if code == "unauthorized":
            response.headers[hdrs.WWW_AUTHENTICATE] = "Bearer"
        if code in ("busy", "caller_busy"):
            response.headers[hdrs.RETRY_AFTER] = _RETRY_AFTER_S
        if code in ("oversized", "busy", "caller_busy"):
            response.force_close()  # the rest of the body is not worth a kept-alive connection
        return response


def tls_context(gate: GateSettings) -> ssl.SSLContext | None:
    """The server's TLS context when ``tls_cert`` and ``tls_key`` are both set; None when
    neither is. :class:`GateTlsError` for one without the other or files that do not
    load."""
    return server_tls_context(
        gate.tls_cert, gate.tls_key, section="GATE", served="the gate", error=GateTlsError
    )


def _trace_headers(request: web.Request) -> list[tuple[str, bytes | None]]:
    """The caller's trace-context headers as bytes, for the Kafka loop's pass-through."""
    return [
        (name, value.encode("utf-8", "surrogateescape"))
        for name, value in request.headers.items()
        if name.lower() in _PROPAGATED
    ]


def _too_large(length: int | None, limit: int) -> str:
    size = "the body" if length is None else f"{length} bytes"
    return f"{size} is over the limit of {limit} bytes"


def _json(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type=_JSON)


def _error_body(status: int, detail: str) -> str:
    """One line of JSON for a response that is not a gate refusal (404, 405, 500): the
    same shape as :class:`GateError`, its code the HTTP status's name."""
    name = HTTPStatus(status).phrase.lower().replace(" ", "_") if status in _PHRASES else "error"
    return json.dumps({"error": name, "detail": detail[:_MAX_DETAIL]}, separators=(",", ":"))


_PHRASES = frozenset(status.value for status in HTTPStatus)


@web.middleware
async def _arrival(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Where the latency clock starts: when the request's head was parsed off the socket
    (so a wait for the event loop to run the handler counts, as the caller sees it), else
    the earliest the application sees it (headers parsed, body not yet read)."""
    request[_ARRIVED] = head_arrived(request) or time.monotonic()
    return await handler(request)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own errors (404, 405, ...) and any unexpected exception as one line of
    JSON; a traceback only ever goes to the log."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _json(exc.status, _error_body(exc.status, exc.reason))
        for name in (hdrs.ALLOW, hdrs.WWW_AUTHENTICATE):
            if name in exc.headers:
                response.headers[name] = exc.headers[name]
        return response
    except Exception:
        log.exception("gate_http_error", method=request.method, path=request.path[:200])
        return _json(500, _error_body(500, "the gate failed on this request"))
