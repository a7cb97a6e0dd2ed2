"""A gate behind a real server on a free port, the callers' tokens, and the requests the
HTTP gate tests send: shared by the server, fuzz and web limit tests."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from streamproc.config import Settings
from streamproc.contracts.gate_events import GateError, GateErrorCode, GateReply
from streamproc.gate.http.auth import caller_stanza
from streamproc.gate.http.server import CHECK_PATH, GateServer
from streamproc.gate.outbox import Outbox, OutboxLimits
from streamproc.gate.service import GateService
from streamproc.gate.sink import RecordSink
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.web.token_file import new_token
from streamproc.wiring import build_gate
from tests.unit.gate.conftest import event

TOKEN = new_token()
"""The caller of tenant "t" (the helpers' events)."""
OTHER_TOKEN = new_token()
"""A caller of tenant "x" only."""
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SUPPORTED = "The supplier delivered 90 of 100 pieces."
SMALL_LIMIT = 4096
OUTBOX_LIMITS = OutboxLimits(
    max_records=1000, max_bytes=1 << 20, stall_s=0.5, drain_s=0.2, retry_s=0.05
)


class RecordingSensor:
    """A GateSensor that keeps what it is told."""

    def __init__(self) -> None:
        self.decided_replies: list[tuple[GateReply, str]] = []
        self.refusals: list[tuple[GateErrorCode, str]] = []
        self.publish_failures: list[str] = []
        self.trace_drops: list[tuple[str, str, str]] = []
        self.streams_open: list[int] = []

    def decided(self, reply: GateReply, *, path: str) -> None:
        self.decided_replies.append((reply, path))

    def pending(self, count: int) -> None:
        del count

    def judged(self, batch_size: int, judge_ms: float) -> None:
        del batch_size, judge_ms

    def streams(self, count: int) -> None:
        self.streams_open.append(count)

    def refused(self, code: GateErrorCode, *, path: str) -> None:
        self.refusals.append((code, path))

    def publish_failed(self, *, path: str) -> None:
        self.publish_failures.append(path)

    def trace_context_dropped(self, header: str, reason: str, *, path: str) -> None:
        self.trace_drops.append((header, reason, path))


@dataclass
class Gate:
    server: GateServer
    service: GateService
    sensor: RecordingSensor
    settings: Settings
    scheme: str = "http"
    outbox: Outbox | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.port}"

    @property
    def check_url(self) -> str:
        return self.url + CHECK_PATH


def tokens_file(directory: Path) -> Path:
    path = directory / "callers.toml"
    path.write_text(
        caller_stanza("app", ["t"], TOKEN) + caller_stanza("other", ["x"], OTHER_TOKEN),
        encoding="utf-8",
    )
    return path


def gate_settings(directory: Path | None, **overrides: Any) -> Settings:
    worker = overrides.pop("worker", {})
    gate: dict[str, Any] = {"publish": False, "host": "127.0.0.1", "port": 0, **overrides}
    if directory is not None and "tokens_file" not in gate:
        gate["tokens_file"] = tokens_file(directory)
    return Settings(judge={"name": "rules"}, gate=gate, worker=worker)


@asynccontextmanager
async def serving(
    settings: Settings,
    *,
    sink: RecordSink | None = None,
    start: bool = True,
    sensor: RecordingSensor | None = None,
) -> AsyncIterator[Gate]:
    """A gate service (the rules judge) behind a real server on a free port."""
    sensor = sensor or RecordingSensor()
    service = build_gate(
        settings, telemetry=Telemetry.from_settings(TelemetrySettings()), sensor=sensor
    )
    if start:
        await service.start()
    outbox = None
    if sink is not None:
        outbox = Outbox(sink, OUTBOX_LIMITS)
        outbox.start()
    server = GateServer(settings.gate, service, sensor=sensor, outbox=outbox)
    await server.start()
    try:
        yield Gate(
            server,
            service,
            sensor,
            settings,
            "https" if settings.gate.tls_cert else "http",
            outbox,
        )
    finally:
        await server.stop()
        await service.close()
        if outbox is not None:
            await outbox.close()


def headers(token: str | None = TOKEN, **extra: str) -> dict[str, str]:
    sent = {"Content-Type": "application/json", **extra}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return sent


def body(answer: str = SUPPORTED, **fields: Any) -> bytes:
    return json.dumps(event(answer, **fields)).encode()


async def post(
    gate: Gate,
    data: Any,
    sent: dict[str, str] | None = None,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[int, str, aiohttp.ClientResponse]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            gate.check_url,
            data=data,
            headers=headers() if sent is None else sent,
            ssl=ssl_context if ssl_context is not None else True,
        ) as response,
    ):
        return response.status, await response.text(), response


def refused_with(status: int, text: str, code: GateErrorCode, expected_status: int) -> GateError:
    """The body is one line of JSON, a GateError with ``code``."""
    assert status == expected_status, text
    assert "\n" not in text
    error = GateError.model_validate_json(text)
    assert error.error == code, error
    return error


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-days", "2", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
