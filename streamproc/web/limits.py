"""What one HTTP connection may hold of an aiohttp server: each phase timed, the number
of connections capped, and every error the server itself makes one short line of JSON.

aiohttp 3.14 has a keep-alive timeout (which also closes a connection that never sends
a byte) and limits on line and header sizes, but no timeout for a request head that
arrives slowly, none for a slow body, and no connection cap. Here:

- **head**: a connection must deliver a complete request head within
  ``header_timeout_s`` of opening, and a later request's head within ``header_timeout_s``
  of its first byte; else ``408`` (JSON) and the connection is closed. Over TLS the
  handshake must also end within ``header_timeout_s`` (asyncio's default is 60 s);
- **body**: a body must arrive within ``body_timeout_s`` of its head. A handler still
  reading it gets :class:`BodyTimeout` (an ``HTTPRequestTimeout``, answered 408 JSON),
  and the connection closes after that reply; a body nobody reads is cut off;
- **idle**: aiohttp's ``keepalive_timeout`` is ``idle_timeout_s``;
- **cap**: at most ``max_connections`` open (lowered to fit the open-file limit, so
  ``accept`` never fails for want of descriptors). A new connection beyond it closes the
  oldest one that is not in a request (waiting for a head, or idle), so a flood of
  half-open connections cannot lock out a real caller; when every connection is in a
  request, the new one is answered ``503`` (JSON) and closed;
- **errors**: aiohttp's own replies (400 for a request it cannot parse, 404, 405, 500,
  504) are ``{"error": ..., "detail": ...}`` on one line, never an echo of the request
  (:mod:`streamproc.web.errors`).

Connection events are logged on ``streamproc.http``, repeats folded by
:mod:`streamproc.telemetry.log_dedup`. :func:`head_arrived` tells a handler when its
request's head was parsed off the socket: a caller's latency starts there, before any
wait for the event loop to run the handler.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from streamproc.web.errors import error_body, json_errors, raw_reply
from streamproc.web.options import HttpLimitSettings

__all__ = [
    "LISTEN_BACKLOG",
    "BodyTimeout",
    "HttpLimits",
    "LimitedAppRunner",
    "LimitedSite",
    "file_headroom",
    "head_arrived",
]

log = logging.getLogger("streamproc.http")

_JSON = "application/json"
_ARRIVALS_KEPT = 32
"""Head times a connection remembers (pipelined requests not yet handled)."""
_FD_RESERVE = 64
"""Descriptors kept back from the open-file limit for what else the process opens
(broker connections, log files, the metrics server)."""


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The limits one server applies; :meth:`from_settings` reads them from settings."""

    header_timeout_s: float = 5.0
    body_timeout_s: float = 30.0
    idle_timeout_s: float = 75.0
    max_connections: int = 512

    @classmethod
    def from_settings(cls, http: HttpLimitSettings) -> HttpLimits:
        return cls(
            header_timeout_s=http.header_timeout_s,
            body_timeout_s=http.body_timeout_s,
            idle_timeout_s=http.idle_timeout_s,
            max_connections=http.max_connections,
        )


class BodyTimeout(web.HTTPRequestTimeout):
    """Raised from a body read once ``body_timeout_s`` has passed since the head."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(
            text=error_body(408, f"the request body did not arrive within {timeout_s:g} s"),
            content_type=_JSON,
        )


def file_headroom() -> int | None:
    """Descriptors still free under the soft open-file limit, less a reserve; None when
    the limit is unlimited or cannot be read."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 0
    return max(1, soft - used - _FD_RESERVE)


class _LimitedHandler(RequestHandler):
    """aiohttp's connection protocol with the head and body timeouts and JSON errors.

    It reads aiohttp's own per-connection state (``_messages``, ``_request_count``,
    ``_request_in_progress``, ``_lingering_time``): tests/unit/web/test_http_limits.py
    pins the behaviour that relies on it."""

    def __init__(self, manager: _LimitedServer, *, limits: HttpLimits, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None
        self._arrivals: OrderedDict[int, float] = OrderedDict()
        """``time.monotonic()`` when each request head was parsed, by id of its message."""

    # -- connection state, read by the server's cap

    @property
    def in_request(self) -> bool:
        """A request head has arrived and its reply is not done (or is queued)."""
        return bool(self._request_in_progress or self._messages or self._reading_body())

    def _reading_body(self) -> bool:
        return self._body is not None and not self._body.is_eof()

    # -- protocol events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if not self._force_close:
            self._start_head_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._arrivals.clear()
        self._cancel_head_timer()
        self._cancel_body_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        was_reading_body = self._reading_body()
        requests = self._request_count
        super().data_received(data)
        if self._body is not None and self._body.is_eof():
            self._cancel_body_timer()  # not held (with the body's bytes) for the timeout
        if self._request_count != requests:
            self._note_arrivals(self._request_count - requests)
            self._cancel_head_timer()
            message = self._messages[-1] if self._messages else None
            if message is not None and not message[1].is_eof():
                self._start_body_timer(message[1])
        elif data and not was_reading_body and self._head_timer is None:
            self._start_head_timer()

    def _note_arrivals(self, new: int) -> None:
        now = time.monotonic()
        for message, _ in list(self._messages)[-new:]:
            self._arrivals[id(message)] = now
        while len(self._arrivals) > _ARRIVALS_KEPT:
            self._arrivals.popitem(last=False)

    def arrived(self, message: object) -> float | None:
        """When the head ``message`` was parsed (forgotten once asked)."""
        return self._arrivals.pop(id(message), None)

    def _start_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self._loop.call_later(
            self._limits.header_timeout_s, self._head_timed_out, self._request_count
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self, requests: int) -> None:
        self._head_timer = None
        if self.transport is None or self._request_count != requests or self.in_request:
            return
        log.info("http_header_timeout after %g s", self._limits.header_timeout_s)
        detail = f"the request head did not arrive within {self._limits.header_timeout_s:g} s"
        self.transport.write(raw_reply(408, detail))
        self.force_close()

    def _start_body_timer(self, body: StreamReader) -> None:
        self._cancel_body_timer()
        self._body = body
        self._body_timer = self._loop.call_later(
            self._limits.body_timeout_s, self._body_timed_out, body
        )

    def _cancel_body_timer(self) -> None:
        """Forget the body: a pending timer would keep it, and its unread bytes, alive."""
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._body = None

    def _body_timed_out(self, body: StreamReader) -> None:
        self._body_timer = None
        if body.is_eof() or self.transport is None:
            return
        log.info("http_body_timeout after %g s", self._limits.body_timeout_s)
        if self._request_in_progress:
            # The handler answers 408 from its read; no lingering for the rest of the
            # body, and the connection closes after that reply.
            self._lingering_time = 0.0
            self.close()
            body.set_exception(BodyTimeout(self._limits.body_timeout_s))
        else:
            self.force_close()

    # -- errors aiohttp itself answers

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> StreamResponse:
        """aiohttp's reply to a request it cannot parse (400) or a handler that failed
        outside any middleware (500, 504): one line of JSON that never echoes the
        request, and one log line (a traceback only for a 500)."""
        error = type(exc).__name__ if exc is not None else "none"
        if status >= 500:
            log.error("http_server_error status=%d error=%s", status, error, exc_info=exc)
            detail = "the server failed on this request"
        else:
            log.info("http_bad_request status=%d error=%s", status, error)
            detail = f"the request could not be parsed ({error})"
        if request.writer.output_size > 0:
            raise ConnectionError("the response has begun; no error reply can follow")
        response = web.Response(status=status, text=error_body(status, detail), content_type=_JSON)
        response.force_close()
        return response


class _LimitedServer(web.Server):
    """aiohttp's server with :class:`_LimitedHandler` connections under a cap."""

    def __init__(self, *args: Any, limits: HttpLimits, max_connections: int, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._limits = limits
        self.max_connections = max_connections
        self.refused = 0
        self.evicted = 0

    def __call__(self) -> RequestHandler:
        return _LimitedHandler(self, loop=self._loop, limits=self._limits, **self._kwargs)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        if len(self._connections) >= self.max_connections and not self._evict_one():
            self.refused += 1
            log.warning("http_connection_refused open=%d", len(self._connections))
            transport.write(raw_reply(503, "too many open connections; retry shortly"))
            handler.force_close()
            return
        super().connection_made(handler, transport)

    def _evict_one(self) -> bool:
        """Close the oldest connection that is not in a request; False when all are."""
        for handler in self._connections:
            if isinstance(handler, _LimitedHandler) and not handler.in_request:
                self.evicted += 1
                log.info("http_connection_evicted open=%d", len(self._connections))
                handler.force_close()
                # aiohttp forgets it once its task ends; it no longer counts now.
                del self._connections[handler]
                return True
        return False


class LimitedAppRunner(web.AppRunner):
    """An ``AppRunner`` whose server applies :class:`HttpLimits`, with aiohttp's own error
    replies as JSON (:func:`~streamproc.web.errors.json_errors`); access log
    off."""

    def __init__(self, app: web.Application, limits: HttpLimits) -> None:
        # Innermost, so the application's own middlewares see a JSON reply like any other.
        if not app.frozen and json_errors not in app.middlewares:
            app.middlewares.append(json_errors)
        super().__init__(app, access_log=None, keepalive_timeout=limits.idle_timeout_s)
        self._limits = limits

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()
        headroom = file_headroom()
        cap = self._limits.max_connections
        if headroom is not None and headroom < cap:
            log.warning(
                "http_max_connections lowered from %d to %d to fit the open-file limit",
                cap,
                headroom,
            )
            cap = headroom
        # The same handler, request factory and handler options aiohttp's own server got
        # (the application builds them; Server keeps the options in _kwargs).
        inner = plain.request_factory

        def stamped(
            message: Any, payload: Any, protocol: Any, writer: Any, task: Any
        ) -> BaseRequest:
            request = inner(message, payload, protocol, writer, task)
            if isinstance(protocol, _LimitedHandler):
                arrived = protocol.arrived(message)
                if arrived is not None:
                    request[_HEAD_ARRIVED] = arrived
            return request

        return _LimitedServer(
            plain.request_handler,
            request_factory=stamped,
            handler_cancellation=plain.handler_cancellation,
            loop=asyncio.get_running_loop(),
            limits=self._limits,
            max_connections=cap,
            **plain._kwargs,
        )


LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them (capped by
``net.core.somaxconn``). aiohttp's default, 128, dropped the SYNs of a larger burst of
new connections, and each dropped client waited a 1 s SYN retransmit before it was even
heard: measured, 49 of a 200-request burst answered within 191 ms by the gate took
1.05-1.22 s as the client saw it. Only the kernel's queue is deepened: asyncio accepts
as many connections per wake-up as the backlog it was given, and 1024 at once would
overrun the connection cap's file-descriptor headroom before it could evict any."""


class LimitedSite(web.TCPSite):
    """A ``TCPSite`` whose TLS handshake must end within ``header_timeout_s`` (a
    connection that never finishes it holds a descriptor the cap does not yet see), with
    a listen backlog of ``LISTEN_BACKLOG``."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        *,
        limits: HttpLimits,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._handshake_timeout_s = limits.header_timeout_s

    async def start(self) -> None:
        await self._start_serving()
        assert isinstance(self._server, asyncio.Server)
        for listening in self._server.sockets:
            with listening.dup() as shared:  # the same listening socket: a deeper queue
                shared.listen(LISTEN_BACKLOG)

    async def _start_serving(self) -> None:
        if self._ssl_context is None:
            await super().start()
            return
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            server,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self._handshake_timeout_s,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


_HEAD_ARRIVED: web.RequestKey[float] = web.RequestKey("streamproc.http.head_arrived", float)


def head_arrived(request: BaseRequest) -> float | None:
    """``time.monotonic()`` when ``request``'s head was parsed off the socket, on a
    server run by :class:`LimitedAppRunner`; None elsewhere."""
    return request.get(_HEAD_ARRIVED)
