"""Connection limits of the gate and the review page, each in its own process under the
usual 1,024 open-file limit, on real sockets:

- 1,100 half-open connections (a request head never finished): ``/healthz`` and a real
  request are still answered at once, and the server never runs out of descriptors;
- a half-sent head is answered 408 and closed within ``http.header_timeout_s``;
- a request aiohttp cannot parse gets one line of JSON that does not echo it;
- a flood of identical errors is logged once, then once more with its count.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import resource
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamproc.cli.child_process import WorkerProcess
from tests.integration.run_settings import run_settings

pytestmark = pytest.mark.slow

FILE_LIMIT = 1024
HALF_OPEN = 1100
HEADER_TIMEOUT_S = 3.0
ANSWER_BOUND_S = 2.0
TOKEN = "http-limits-token"
HTTP = {"header_timeout_s": HEADER_TIMEOUT_S, "body_timeout_s": 5.0, "idle_timeout_s": 30.0}


class Served:
    """A server process: its base URL, log and a valid request to make of it."""

    def __init__(self, name: str, url: str, process: WorkerProcess) -> None:
        self.name = name
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.process = process

    async def valid_request(self, session: aiohttp.ClientSession) -> int:
        if self.name == "gate":
            event = {
                "event_id": "limits-1",
                "answer_id": "ans-limits-1",
                "conversation_id": "c1",
                "tenant": "open",
                "assistant_id": "support-bot",
                "model": "m1",
                "occurred_at": datetime.now(UTC).isoformat(),
                "question": "Where is order 7?",
                "answer": "Order 7 was delivered on 5 March.",
                "evidence": [{"id": "D1", "text": "Order 7 was delivered on 5 March."}],
            }
            async with session.post(
                f"{self.url}/v1/check",
                data=json.dumps(event).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            ) as reply:
                await reply.read()
                return reply.status
        async with session.get(f"{self.url}/login") as reply:
            await reply.read()
            return reply.status

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(name: str, kafka_bootstrap: str, tmp_path: Path) -> Served:
    port = _free_port()
    if name == "gate":
        tokens = tmp_path / "tokens.toml"
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        tokens.write_text(
            f'[[caller]]\nname = "shop"\ntenants = ["open"]\ntoken_sha256 = "{digest}"\n'
        )
        settings = run_settings(
            kafka_bootstrap,
            "http-limits-gate",
            partitions=1,
            judge={"name": "rules"},
            gate={"port": port, "tokens_file": str(tokens), "kafka_requests": False, "http": HTTP},
        )
        command: tuple[str, ...] = ("gate", "serve")
    else:
        settings = run_settings(
            kafka_bootstrap,
            "http-limits-review",
            partitions=1,
            review={
                "port": port,
                "store_url": f"sqlite:///{tmp_path / 'review.db'}",
                "http": HTTP,
            },
        )
        command = ("review", "serve")
    process = WorkerProcess(settings, tmp_path / f"{name}.log", command=command).start()
    assert process.pid is not None
    # The usual default limit, set before the process gets as far as opening its server.
    resource.prlimit(process.pid, resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))
    return Served(name, f"http://127.0.0.1:{port}", process)


def _wait_ready(served: Served, timeout_s: float = 120.0) -> None:
    async def healthy() -> bool:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{served.url}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r,
            ):
                return r.status == 200
        except aiohttp.ClientError:
            return False

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert served.process.running, f"{served.name} exited:\n{served.process.log_tail()}"
        if asyncio.run(healthy()):
            return
        time.sleep(0.5)
    raise AssertionError(f"{served.name} not ready in {timeout_s} s:\n{served.process.log_tail()}")


@pytest.fixture(params=["gate", "review"])
def served(request: Any, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Served]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < HALF_OPEN + 200:  # this process holds the 1,100 client ends
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * HALF_OPEN), hard))
    served = _start(request.param, kafka_bootstrap, tmp_path)
    try:
        _wait_ready(served)
        limits = Path(f"/proc/{served.process.pid}/limits").read_text()
        assert any(
            line.startswith("Max open files") and line.split()[3] == str(FILE_LIMIT)
            for line in limits.splitlines()
        ), limits
        yield served
    finally:
        if served.process.running:  # a test may have stopped it to read the whole log
            code = served.process.stop()
            assert code == 0, f"{served.name} exited {code}:\n{served.process.log_tail()}"


async def _half_open(port: int, count: int) -> list[asyncio.StreamWriter]:
    """``count`` connections, each with a request head begun and never finished."""
    writers: list[asyncio.StreamWriter] = []
    for _ in range(count):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            continue  # refused at the door is as good as closed at once
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never-Ends: ")
        writers.append(writer)
    return writers


async def test_valid_requests_are_answered_past_1100_half_open_connections(
    served: Served,
) -> None:
    writers = await _half_open(served.port, HALF_OPEN)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            started = time.monotonic()
            async with session.get(f"{served.url}/healthz") as reply:
                assert reply.status == 200
            healthz_s = time.monotonic() - started
            started = time.monotonic()
            assert await served.valid_request(session) == 200
            request_s = time.monotonic() - started
    finally:
        for writer in writers:
            writer.close()
    print(f"{served.name}: /healthz {healthz_s:.3f} s, request {request_s:.3f} s")
    assert healthz_s < ANSWER_BOUND_S and request_s < ANSWER_BOUND_S
    assert served.process.running
    open_fds = len(list(Path(f"/proc/{served.process.pid}/fd").iterdir()))
    assert open_fds < FILE_LIMIT
    log = served.log()
    assert "Too many open files" not in log and "out of system resource" not in log
    assert "http_connection_evicted" in log


async def test_a_half_sent_head_is_closed_within_the_header_timeout(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    started = time.monotonic()
    writer.write(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
    raw = await asyncio.wait_for(reader.read(), HEADER_TIMEOUT_S + 5)
    elapsed = time.monotonic() - started
    writer.close()
    print(f"{served.name}: half-sent head closed after {elapsed:.2f} s")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"] == "request_timeout"
    assert elapsed < HEADER_TIMEOUT_S + 1.0


async def test_malformed_requests_get_json_without_echo_and_one_log_line_with_a_count(
    served: Served,
) -> None:
    marker = b"ECHO-ME-" + b"z" * 6000
    for _ in range(200):
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nBroken Header " + marker + b"\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"400"  # aiohttp answers these as HTTP/1.0
        assert b"application/json" in head
        assert b"\n" not in body.strip() and b"ECHO-ME" not in body and len(body) < 300
        assert json.loads(body)["error"] == "bad_request"
    code = served.process.stop()  # writes what repeats it still holds
    assert code == 0, served.process.log_tail()
    lines = [line for line in served.log().splitlines() if "http_bad_request" in line]
    assert 2 <= len(lines) <= 4, lines  # the first, then the count (a window may close)
    counts = [int(line.split("(repeated ")[1].split()[0]) for line in lines if "repeated" in line]
    assert len(lines) - len(counts) + sum(counts) == 200, lines
    assert "ECHO-ME" not in served.log()
