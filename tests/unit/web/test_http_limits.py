"""Connection limits on a real socket: a slow head or body is cut off with a 408, an idle
connection is closed, the cap makes room for a real request, and aiohttp's own errors are
one line of JSON that never echoes the request."""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import ssl
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import ValidationError

from streamproc.web.errors import error_body
from streamproc.web.limits import (
    LISTEN_BACKLOG,
    HttpLimits,
    _LimitedServer,
    file_headroom,
    head_arrived,
)
from streamproc.web.options import HttpLimitSettings
from streamproc.web.server import AppServer
from tests.unit.gate.http.http_gate import self_signed

LIMITS = HttpLimits(header_timeout_s=0.3, body_timeout_s=0.5, idle_timeout_s=0.6, max_connections=4)


class _Echo(AppServer):
    """``GET /`` says hello; ``POST /`` reads the body and says its length;
    ``GET /slow`` holds the request until :attr:`release` is set; ``GET /waited`` says
    how long its head waited before the handler ran (``GET /pause`` sleeps 0.3 s first)."""

    def __init__(self, limits: HttpLimits) -> None:
        super().__init__(host="127.0.0.1", port=0, limits=limits)
        self.release = asyncio.Event()

    def _application(self) -> web.Application:
        async def hello(_: web.Request) -> web.Response:
            return web.Response(text="hello")

        async def length(request: web.Request) -> web.Response:
            return web.Response(text=str(len(await request.read())))

        async def slow(_: web.Request) -> web.Response:
            await self.release.wait()
            return web.Response(text="late")

        async def pause(_: web.Request) -> web.Response:
            await asyncio.sleep(0.3)
            return web.Response(text="paused")

        async def waited(request: web.Request) -> web.Response:
            arrived = head_arrived(request)
            assert arrived is not None
            return web.Response(text=f"{time.monotonic() - arrived:.3f}")

        app = web.Application()
        app.router.add_get("/pause", pause)
        app.router.add_get("/waited", waited)
        app.router.add_get("/", hello)
        app.router.add_post("/", length)
        app.router.add_get("/slow", slow)
        return app


@pytest.fixture()
async def server() -> AsyncIterator[_Echo]:
    served = _Echo(LIMITS)
    await served.start()
    try:
        yield served
    finally:
        served.release.set()
        await served.stop()


async def _connect(server: _Echo) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert server.port is not None
    return await asyncio.open_connection("127.0.0.1", server.port)


async def _reply(reader: asyncio.StreamReader, timeout_s: float = 3.0) -> tuple[int, bytes]:
    """Status and body of one response read to the connection's end."""
    raw = await asyncio.wait_for(reader.read(), timeout_s)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def _get(server: _Echo, path: str = "/") -> tuple[int, bytes]:
    reader, writer = await _connect(server)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    try:
        return await _reply(reader)
    finally:
        writer.close()


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
async def test_a_half_sent_head_is_answered_408_and_closed_within_the_header_timeout(
    server: _Echo,
) -> None:
    reader, writer = await _connect(server)
    started = time.monotonic()
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    status, body = await _reply(reader)
    elapsed = time.monotonic() - started
    writer.close()
    assert status == 408
    assert json.loads(body)["error"] == "request_timeout"
    assert LIMITS.header_timeout_s - 0.05 <= elapsed < LIMITS.header_timeout_s + 0.5


async def test_a_connection_that_sends_nothing_is_closed_within_the_header_timeout(
    server: _Echo,
) -> None:
    reader, writer = await _connect(server)
    started = time.monotonic()
    status, _ = await _reply(reader)
    writer.close()
    assert status == 408
    assert time.monotonic() - started < LIMITS.header_timeout_s + 0.5


async def test_a_head_trickled_byte_by_byte_is_cut_off_at_the_header_timeout(
    server: _Echo,
) -> None:
    reader, writer = await _connect(server)
    started = time.monotonic()
    closed = asyncio.ensure_future(reader.read())
    for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Drip: " + b"a" * 100:
        if closed.done():
            break
        writer.write(bytes([byte]))
        await asyncio.sleep(0.02)
    raw = await asyncio.wait_for(closed, 3)
    writer.close()
    assert raw.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < LIMITS.header_timeout_s + 0.5


async def test_a_slow_body_is_answered_408_in_json_and_the_connection_closed(
    server: _Echo,
) -> None:
    reader, writer = await _connect(server)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part")
    started = time.monotonic()
    status, body = await _reply(reader)
    writer.close()
    assert status == 408
    assert json.loads(body) == json.loads(
        error_body(408, f"the request body did not arrive within {LIMITS.body_timeout_s:g} s")
    )
    assert time.monotonic() - started < LIMITS.body_timeout_s + 0.5


async def test_a_whole_body_is_read_and_the_connection_kept_then_closed_when_idle(
    server: _Echo,
) -> None:
    reader, writer = await _connect(server)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert await asyncio.wait_for(reader.readexactly(1), 3) == b"5"
    # Kept alive past the header timeout (no new request begun), closed once idle.
    started = time.monotonic()
    rest = await asyncio.wait_for(reader.read(), 3)
    writer.close()
    assert rest == b""
    assert LIMITS.idle_timeout_s - 0.1 <= time.monotonic() - started < LIMITS.idle_timeout_s + 1.0


async def test_a_malformed_request_gets_one_line_of_json_that_does_not_echo_it(
    server: _Echo,
) -> None:
    marker = b"SECRET-MARKER-" + b"x" * 4000
    reader, writer = await _connect(server)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header " + marker + b"\r\n\r\n")
    status, body = await _reply(reader)
    writer.close()
    assert status == 400
    assert b"\n" not in body.strip()
    assert json.loads(body)["error"] == "bad_request"
    assert b"SECRET-MARKER" not in body and len(body) < 300


async def test_half_open_connections_past_the_cap_do_not_lock_out_a_real_request(
    server: _Echo,
) -> None:
    idle = [await _connect(server) for _ in range(LIMITS.max_connections * 3)]
    for _, writer in idle:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finished
    started = time.monotonic()
    status, body = await _get(server)
    assert (status, body) == (200, b"hello")
    assert time.monotonic() - started < LIMITS.header_timeout_s
    for _, writer in idle:
        writer.close()


async def test_with_every_connection_in_a_request_a_new_one_gets_503(server: _Echo) -> None:
    busy = [await _connect(server) for _ in range(LIMITS.max_connections)]
    for _, writer in busy:
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(0.1)
    status, body = await _get(server)
    assert status == 503
    assert json.loads(body)["error"] == "service_unavailable"
    server.release.set()
    for reader, writer in busy:
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)).startswith(
            b"HTTP/1.1 200 "
        )
        writer.close()
    assert await _get(server) == (200, b"hello")


def test_settings_refuse_a_header_timeout_longer_than_the_idle_timeout() -> None:
    with pytest.raises(ValidationError, match="header_timeout_s must not exceed idle_timeout_s"):
        HttpLimitSettings(header_timeout_s=10, idle_timeout_s=5)
    limits = HttpLimits.from_settings(HttpLimitSettings(max_connections=7))
    assert limits == HttpLimits(max_connections=7)


async def test_the_cap_is_lowered_to_fit_the_open_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    served = _Echo(HttpLimits(max_connections=100_000))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(400, hard), hard))
    try:
        await served.start()
        headroom = file_headroom()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert headroom is not None and headroom < 400
        runner = served._runner
        assert runner is not None and isinstance(runner.server, _LimitedServer)
        assert headroom <= runner.server.max_connections <= headroom + 2
        assert await _get(served) == (200, b"hello")
    finally:
        await served.stop()


async def test_aiohttps_own_404_and_405_are_json_while_a_handlers_text_is_kept() -> None:
    class _Texts(_Echo):
        def _application(self) -> web.Application:
            app = super()._application()

            async def refuse(_: web.Request) -> web.Response:
                raise web.HTTPForbidden(text="not yours")

            app.router.add_get("/refuse", refuse)
            return app

    served = _Texts(LIMITS)
    await served.start()
    try:
        status, body = await _get(served, "/nowhere")
        assert status == 404 and json.loads(body)["error"] == "not_found"
        reader, writer = await _connect(served)
        writer.write(b"DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 3)
        writer.close()
        assert raw.startswith(b"HTTP/1.1 405 ") and b"\r\nAllow: " in raw
        assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"] == "method_not_allowed"
        assert await _get(served, "/refuse") == (403, b"not yours")
    finally:
        await served.stop()


async def test_over_tls_a_stalled_handshake_and_a_slow_head_are_both_cut_off(
    tmp_path: Path,
) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    class _Tls(_Echo):
        def __init__(self) -> None:
            AppServer.__init__(self, host="127.0.0.1", port=0, ssl_context=context, limits=LIMITS)
            self.release = asyncio.Event()

    served = _Tls()
    await served.start()
    try:
        # A TCP connection that never starts the handshake.
        reader, writer = await _connect(served)
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 3) == b""
        writer.close()
        assert time.monotonic() - started < LIMITS.header_timeout_s + 0.5
        # A handshake done, then half a head.
        trusted = ssl.create_default_context(cafile=str(cert))
        assert served.port is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port, ssl=trusted)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        status, body = await _reply(reader)
        writer.close()
        assert status == 408 and json.loads(body)["error"] == "request_timeout"
    finally:
        await served.stop()


async def test_a_pipelined_request_counts_its_wait_from_its_head_arrival(server: _Echo) -> None:
    """Two requests in one write: the second's head arrives with the first's, and its
    handler runs only after the first's 0.3 s; it sees that wait."""
    reader, writer = await _connect(server)
    writer.write(
        b"GET /pause HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /waited HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    try:
        raw = await asyncio.wait_for(reader.read(), 3.0)
    finally:
        writer.close()
    assert raw.count(b"HTTP/1.1 200") == 2, raw
    waited_s = float(raw.rpartition(b"\r\n\r\n")[2])
    assert waited_s >= 0.25, waited_s


async def test_the_listen_queue_holds_a_burst_of_new_connections(server: _Echo) -> None:
    """The kernel shows a listening socket's backlog as its Send-Q (``ss -lt``); with
    aiohttp's 128 a burst of 200 connections lost SYNs and waited a 1 s retransmit."""
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("ss (iproute2) is not installed")
    shown = subprocess.run(
        [ss, "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert LISTEN_BACKLOG >= 1024
    assert int(shown[2]) == min(
        LISTEN_BACKLOG, int(Path("/proc/sys/net/core/somaxconn").read_text())
    )
