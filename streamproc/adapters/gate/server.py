"""The gate over HTTP: ``POST /v1/check`` an answer event, get a decision within its budget.

A request is refused as early as the refusal can be known, so bad input costs as little
as possible (each refusal is a one-line :class:`~streamproc.gate_events.GateError`,
counted with ``sensor.refused``):

1. no or unknown ``Authorization: Bearer`` token: 401 (``WWW-Authenticate: Bearer``);
2. a Content-Type other than ``application/json``: 415;
3. a Content-Length over the intake limit (``settings.worker.max_event_bytes``): 413,
   before a byte of the body is read; a body without a length (chunked) is read up to the
   limit plus one byte, never more, and refused the same way past it;
4. the service not ready (starting, closing): 503;
5. an event that fails intake (JSON, schema, event-time bounds - the worker's own
   :meth:`GateService.parse`): 400;
6. an answer of a tenant the caller's token does not name: 403;
7. a bad ``X-Budget-Ms``: 400.

A client sending ``Expect: 100-continue`` gets steps 1 to 4 in place of the ``100
Continue``, so a refused body is never sent at all. A refused body that is on its way is
drained and dropped (aiohttp's lingering close, at most 10 s) so the client reads the
refusal rather than a reset connection; it is never buffered.

Then the service decides (it never raises), the decision's monitored records go to the
sink, and the reply is sent. A sink that fails does not change the reply - the caller's
decision stands - it is logged and counted (``sensor.publish_failed``). Any other error
(404, 405, a bug) is one line of JSON too, never a traceback.

With ``settings.gate.tls_cert`` and ``tls_key`` the server speaks HTTPS only.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path

import structlog
from aiohttp import HttpVersion11, hdrs, web

from streamproc.adapters.gate.auth import Caller, Callers, callers_for
from streamproc.adapters.http_limits import HttpLimits
from streamproc.adapters.http_server import AppServer
from streamproc.adapters.trace_headers import passthrough
from streamproc.config import GateSettings, Settings
from streamproc.events import AnswerEvent, DeadLetterReason
from streamproc.gate.request import GateRequest, http_origin
from streamproc.gate.sensor import GateSensor
from streamproc.gate.service import GateService
from streamproc.gate.sink import RecordSink
from streamproc.gate_events import BUDGET_HEADER, GateError, GateErrorCode

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
}
_CODES: dict[DeadLetterReason, GateErrorCode] = {
    DeadLetterReason.BAD_JSON: "bad_json",
    DeadLetterReason.SCHEMA_VIOLATION: "schema_violation",
    DeadLetterReason.OVERSIZED: "oversized",
    DeadLetterReason.EVENT_TIME_OUT_OF_RANGE: "event_time_out_of_range",
}
_PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class GateTlsError(ValueError):
    """The TLS settings cannot make a server: one of cert and key without the other, or
    files that do not load."""


class _Refused(Exception):
    """Raised inside the check handler to answer a :class:`GateError`."""

    def __init__(self, code: GateErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class GateServer(AppServer):
    """``POST /v1/check``, ``GET /healthz`` and ``GET /readyz`` on ``settings.gate.host``
    and ``port`` (0: the OS picks; see :attr:`port`); see the module doc.

    Raises :class:`GateTlsError` or :class:`~streamproc.adapters.token_file.TokensFileError`
    when the settings cannot make a server, so a bad deployment fails at startup."""

    def __init__(
        self,
        settings: Settings,
        service: GateService,
        *,
        sensor: GateSensor,
        sink: RecordSink | None,
    ) -> None:
        gate = settings.gate
        super().__init__(
            host=gate.host,
            port=gate.port,
            ssl_context=tls_context(gate),
            limits=HttpLimits.from_settings(gate.http),
        )
        self._service = service
        self._sensor = sensor
        self._sink = sink
        self._callers: Callers | None = callers_for(settings)
        # The intake limit GateService.parse applies (StageLimits.from_settings takes it
        # from the same setting): checked here before the body is read.
        self._max_bytes = settings.worker.max_event_bytes

    def _application(self) -> web.Application:
        app = web.Application(middlewares=[_json_errors])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_post(CHECK_PATH, self._check, expect_handler=self._expect)
        return app

    # ------------------------------------------------------------------ probes

    async def _healthz(self, _: web.Request) -> web.Response:
        return _json(200, '{"status":"ok"}')

    async def _readyz(self, _: web.Request) -> web.Response:
        if self._service.ready():
            return _json(200, '{"status":"ready"}')
        return _json(503, '{"status":"not_ready"}')

    # ------------------------------------------------------------------ a check

    async def _check(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        try:
            gate_request = await self._admit(request, arrived)
        except _Refused as refused:
            return self._refuse(refused.code, refused.detail)
        result = await self._service.check(gate_request)
        if result.records and self._sink is not None:
            try:
                await self._sink.publish(result.records)
            except Exception as exc:  # noqa: BLE001 - the decision stands; the failure is counted
                self._sensor.publish_failed(path="http")
                log.error(
                    "gate_publish_failed",
                    answer_id=gate_request.answer.answer_id,
                    records=len(result.records),
                    error=repr(exc)[:500],
                )
        self._sensor.decided(result.reply, path="http")
        return _json(200, result.reply.model_dump_json())

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: refuse on the headers alone, so a body that would be
        refused (no token, not JSON, too large) is never even sent."""
        try:
            self._from_headers(request)
        except _Refused as refused:
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
            raise _Refused(
                "unauthorized", "a valid 'Authorization: Bearer <token>' header is required"
            )
        if request.content_type.lower() != _JSON:
            raise _Refused(
                "unsupported_media_type",
                f"Content-Type must be {_JSON}, got {request.content_type[:100]!r}",
            )
        length = request.content_length
        if length is not None and length > self._max_bytes:
            raise _Refused("oversized", _too_large(length, self._max_bytes))
        if not self._service.ready():
            raise _Refused("not_ready", "the gate is not ready (starting or stopping)")
        return caller

    async def _admit(self, request: web.Request, arrived: float) -> GateRequest:
        """The request to decide on, or :class:`_Refused` - in the module doc's order."""
        caller = self._from_headers(request)
        body = await self._read_body(request)
        answer = self._service.parse(body)
        if not isinstance(answer, AnswerEvent):
            raise _Refused(_CODES.get(answer.reason, "bad_request"), answer.error)
        if not caller.may_see(answer.tenant):
            raise _Refused(
                "forbidden",
                f"caller {caller.name!r} may not check answers of tenant {answer.tenant[:200]!r}",
            )
        budget = self._service.budget(request.headers.get(BUDGET_HEADER))
        if isinstance(budget, GateError):
            raise _Refused(budget.error, budget.detail)
        ids, trace_headers = passthrough(_trace_headers(request))
        return GateRequest(
            body=body,
            answer=answer,
            budget_ms=budget,
            arrived=arrived,
            origin=http_origin(),
            headers=trace_headers,
            trace_id=ids[0] if ids is not None else None,
            traceparent=request.headers.get("traceparent") if ids is not None else None,
        )

    def _authenticate(self, request: web.Request) -> Caller | None:
        if self._callers is None:
            return None
        scheme, _, token = request.headers.get(hdrs.AUTHORIZATION, "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._callers.authenticate(token.strip())

    async def _read_body(self, request: web.Request) -> bytes:
        """The body, reading at most one byte past the limit (then :class:`_Refused`)."""
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
            raise _Refused("oversized", _too_large(None, self._max_bytes))
        return b"".join(chunks)

    def _refuse(self, code: GateErrorCode, detail: str) -> web.Response:
        self._sensor.refused(code, path="http")
        log.debug("gate_request_refused", code=code, detail=detail[:200])
        error = GateError(error=code, detail=detail[:_MAX_DETAIL])
        response = _json(_STATUS[code], error.model_dump_json())
        if code == "unauthorized":
            response.headers[hdrs.WWW_AUTHENTICATE] = "Bearer"
        if code == "oversized":
            response.force_close()  # the rest of the body is not worth a kept-alive connection
        return response


def tls_context(gate: GateSettings) -> ssl.SSLContext | None:
    """The server's TLS context when ``tls_cert`` and ``tls_key`` are both set; None when
    neither is. :class:`GateTlsError` for one without the other or files that do not
    load."""
    cert, key = gate.tls_cert, gate.tls_key
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("tls_cert", "tls_key") if key is None else ("tls_key", "tls_cert")
        raise GateTlsError(
            f"STREAMPROC_GATE__{given.upper()} is set but STREAMPROC_GATE__{missing.upper()} "
            "is not: set both to serve HTTPS, or neither to serve HTTP"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile=Path(cert), keyfile=Path(key))
    except (OSError, ssl.SSLError) as exc:
        raise GateTlsError(
            f"cannot load the gate's TLS certificate {cert} and key {key}: {exc}"
        ) from None
    return context


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
