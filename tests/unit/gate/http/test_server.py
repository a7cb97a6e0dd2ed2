"""The gate over HTTP, a real server on a free port and a real client: a decision round
trip, every refusal in its order and with its one-line JSON body, the reply not waiting on
the sink (the outbox publishes), the sink's failure not changing the caller's decision,
and HTTPS."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import pytest

from streamproc.config import Settings
from streamproc.contracts.events import Action
from streamproc.contracts.gate_events import GateError, GateErrorCode, GateReply
from streamproc.gate.http.auth import caller_stanza
from streamproc.gate.http.server import CHECK_PATH, GateServer, GateTlsError
from streamproc.gate.outbox import Outbox, OutboxLimits
from streamproc.gate.service import GateService
from streamproc.gate.sink import RecordSink
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.verdicts.record import OutboundRecord
from streamproc.web.token_file import TokensFileError, new_token
from streamproc.wiring import build_gate, output_topics
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

    def decided(self, reply: GateReply, *, path: str) -> None:
        self.decided_replies.append((reply, path))

    def pending(self, count: int) -> None:
        del count

    def judged(self, batch_size: int, judge_ms: float) -> None:
        del batch_size, judge_ms

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


# ------------------------------------------------------------------ a decision


async def test_a_check_round_trip_replies_with_the_decision(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, response = await post(
            gate, body(), headers(traceparent=TRACEPARENT, **{"X-Budget-Ms": "5000"})
        )
        contradicted = await post(
            gate,
            body("The supplier delivered 80 of 100 pieces. Incomplete orders cannot be billed."),
        )
    assert status == 200, text
    assert response.content_type == "application/json" and "\n" not in text
    reply = GateReply.model_validate_json(text)
    assert reply.decision is Action.PASS and reply.verified is True and reply.reason is None
    assert reply.answer_text == SUPPORTED
    assert reply.verdict.answer_id == "ans-e1" and reply.verdict.tenant == "t"
    assert [c.verdict for c in reply.verdict.judgement.claims] == ["supported"]
    assert reply.verdict.trace_id == TRACE_ID  # the caller's trace is continued
    assert reply.latency_ms >= 0 and reply.budget_ms == 5000
    assert reply.policy == "fail-open"
    trimmed = GateReply.model_validate_json(contradicted[1])
    assert trimmed.decision is Action.TRIM
    assert trimmed.answer_text == "Incomplete orders cannot be billed."
    assert [(r.decision, path) for r, path in gate.sensor.decided_replies] == [
        (Action.PASS, "http"),
        (Action.TRIM, "http"),
    ]
    assert gate.sensor.refusals == []


async def test_trace_context_beyond_w3c_limits_is_dropped_counted_and_noted(
    tmp_path: Path,
) -> None:
    tracestate = ",".join(f"k{i}=v" for i in range(40))  # 40 members: W3C allows 32
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(
            gate, body(), headers(traceparent=TRACEPARENT, tracestate=tracestate)
        )
    assert status == 200, text
    reply = GateReply.model_validate_json(text)
    assert reply.verdict.trace_id == TRACE_ID  # the valid traceparent is still continued
    assert any(
        note.startswith("TRACE_CONTEXT_DROPPED: tracestate too_many_members")
        for note in reply.verdict.judgement.limits
    ), reply.verdict.judgement.limits
    assert gate.sensor.trace_drops == [("tracestate", "too_many_members", "http")]


async def test_the_probes_say_live_and_ready(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate, aiohttp.ClientSession() as http:
        async with http.get(gate.url + "/healthz") as response:
            assert (response.status, await response.json()) == (200, {"status": "ok"})
        async with http.get(gate.url + "/readyz") as response:
            assert response.status == 200


async def test_before_the_service_starts_it_is_not_ready(tmp_path: Path) -> None:
    async with (
        serving(gate_settings(tmp_path), start=False) as gate,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(gate.url + "/readyz") as response:
            assert response.status == 503
        async with http.get(gate.url + "/healthz") as response:
            assert response.status == 200
        status, text, _ = await post(gate, body())
    refused_with(status, text, "not_ready", 503)
    assert gate.sensor.refusals == [("not_ready", "http")]


# ------------------------------------------------------------------ who may call


@pytest.mark.parametrize(
    "authorization",
    [None, f"Bearer {new_token()}", "Bearer ", f"Basic {TOKEN}", TOKEN, f"Bearer\t{TOKEN}x"],
)
async def test_no_token_or_an_unknown_one_is_401(tmp_path: Path, authorization: str | None) -> None:
    sent = headers(token=None)
    if authorization is not None:
        sent["Authorization"] = authorization
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, response = await post(gate, body(), sent)
    refused_with(status, text, "unauthorized", 401)
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert gate.sensor.refusals == [("unauthorized", "http")]
    assert gate.sensor.decided_replies == []


async def test_the_bearer_scheme_is_case_insensitive(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(
            gate, body(), {"Content-Type": "application/json", "Authorization": f"bearer {TOKEN}"}
        )
    assert status == 200, text


async def test_without_a_tokens_file_everyone_is_refused(tmp_path: Path) -> None:
    async with serving(gate_settings(None)) as gate:
        status, text, _ = await post(gate, body())
    refused_with(status, text, "unauthorized", 401)


async def test_a_token_for_another_tenant_is_403(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, body(), headers(OTHER_TOKEN))
        own = await post(gate, body(tenant="x"), headers(OTHER_TOKEN))
    error = refused_with(status, text, "forbidden", 403)
    assert "'other'" in error.detail and "'t'" in error.detail
    assert own[0] == 200, own[1]


def test_a_malformed_tokens_file_fails_at_startup(tmp_path: Path) -> None:
    path = tmp_path / "callers.toml"
    path.write_text('[[caller]]\nname = "a"\ntenants = ["t"]\ntoken_sha256 = "abc"\n')
    settings = gate_settings(None, tokens_file=path)
    service = build_gate(
        settings, telemetry=Telemetry.from_settings(TelemetrySettings()), sensor=RecordingSensor()
    )
    with pytest.raises(TokensFileError, match="caller #1"):
        GateServer(settings.gate, service, sensor=RecordingSensor(), outbox=None)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_that_is_not_json_is_415(tmp_path: Path, content_type: str | None) -> None:
    sent = {"Authorization": f"Bearer {TOKEN}"}
    if content_type is not None:
        sent["Content-Type"] = content_type
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, body(), sent)
    refused_with(status, text, "unsupported_media_type", 415)


async def test_a_charset_parameter_is_still_json(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(
            gate, body(), headers(**{"Content-Type": "application/json; charset=utf-8"})
        )
    assert status == 200, text


async def test_authentication_comes_before_the_media_type(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, b"x", {"Content-Type": "text/plain"})
    refused_with(status, text, "unauthorized", 401)


async def test_an_oversized_content_length_is_refused_before_the_body_is_read(
    tmp_path: Path,
) -> None:
    """Only the headers are sent, announcing far more than the limit: the 413 comes back
    though no byte of the body ever does."""
    async with serving(gate_settings(tmp_path)) as gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", gate.server.port)
        try:
            writer.write(
                (
                    f"POST {CHECK_PATH} HTTP/1.1\r\nHost: localhost\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {100 * 1024 * 1024}\r\n\r\n"
                ).encode()
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
            lines = head.decode().split("\r\n")
            length = next(
                int(line.split(":", 1)[1])
                for line in lines
                if line.lower().startswith("content-length:")
            )
            text = (await reader.readexactly(length)).decode()
        finally:
            writer.close()
            await writer.wait_closed()
    assert lines[0].startswith("HTTP/1.1 413"), lines
    error = refused_with(413, text, "oversized", 413)
    assert str(100 * 1024 * 1024) in error.detail
    assert gate.sensor.refusals == [("oversized", "http")]


async def test_expect_100_continue_is_refused_on_the_headers_alone(tmp_path: Path) -> None:
    """With ``Expect: 100-continue`` a request the headers refuse gets its refusal instead
    of the ``100 Continue``, so the body is never sent; an acceptable one continues."""
    async with serving(gate_settings(tmp_path)) as gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", gate.server.port)
        try:
            writer.write(
                (
                    f"POST {CHECK_PATH} HTTP/1.1\r\nHost: localhost\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Expect: 100-continue\r\nContent-Length: {100 * 1024 * 1024}\r\n\r\n"
                ).encode()
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
        finally:
            writer.close()
            await writer.wait_closed()
        async with aiohttp.ClientSession() as http:
            async with http.post(
                gate.check_url, data=body(), headers=headers(), expect100=True
            ) as response:
                accepted = response.status, await response.text()
            async with http.post(
                gate.check_url, data=body(), headers=headers(new_token()), expect100=True
            ) as response:
                unknown = response.status, await response.text()
    assert head.startswith(b"HTTP/1.1 413"), head
    assert accepted[0] == 200, accepted
    refused_with(*unknown, "unauthorized", 401)
    assert gate.sensor.refusals == [("oversized", "http"), ("unauthorized", "http")]


async def test_an_oversized_body_with_its_length_is_413(tmp_path: Path) -> None:
    settings = gate_settings(tmp_path, worker={"max_event_bytes": SMALL_LIMIT})
    async with serving(settings) as gate:
        status, text, _ = await post(gate, body("x" * SMALL_LIMIT))
        after = await post(gate, body())
    refused_with(status, text, "oversized", 413)
    assert after[0] == 200  # the server goes on serving


async def test_a_chunked_body_is_read_up_to_the_limit_and_no_further(tmp_path: Path) -> None:
    settings = gate_settings(tmp_path, worker={"max_event_bytes": SMALL_LIMIT})

    async def chunks(data: bytes, size: int = 512) -> AsyncIterator[bytes]:
        for start in range(0, len(data), size):
            yield data[start : start + size]

    async with serving(settings) as gate:
        status, text, _ = await post(gate, chunks(body("x" * 3 * SMALL_LIMIT)))
        small = await post(gate, chunks(body()))
    refused_with(status, text, "oversized", 413)
    assert small[0] == 200, small[1]  # a chunked body within the limit is judged


async def test_the_body_reader_stops_one_byte_past_the_limit(tmp_path: Path) -> None:
    """White box: of a body far over the limit, the handler reads limit + 1 bytes."""
    from aiohttp import streams
    from aiohttp.test_utils import make_mocked_request

    from streamproc.gate.http import server as module

    settings = gate_settings(tmp_path, worker={"max_event_bytes": SMALL_LIMIT})
    service = build_gate(
        settings, telemetry=Telemetry.from_settings(TelemetrySettings()), sensor=RecordingSensor()
    )
    gate_server = GateServer(settings.gate, service, sensor=RecordingSensor(), outbox=None)

    payload = streams.StreamReader(mock.Mock(), 2**16, loop=asyncio.get_running_loop())
    total = 10 * SMALL_LIMIT
    for _ in range(10):
        payload.feed_data(b"y" * SMALL_LIMIT)
    payload.feed_eof()
    request = make_mocked_request("POST", CHECK_PATH, payload=payload)
    with pytest.raises(module._Refusal) as refused:
        await gate_server._read_body(request)
    assert refused.value.code == "oversized"
    left = await payload.read()
    assert len(left) == total - (SMALL_LIMIT + 1)
    await service.close()


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"{not json", "bad_json"),
        (b"", "bad_json"),
        (b'{"answer": 3}', "schema_violation"),
        (b"[1, 2]", "schema_violation"),
        (
            json.dumps(event(SUPPORTED, occurred_at="2001-01-01T00:00:00Z")).encode(),
            "event_time_out_of_range",
        ),
    ],
)
async def test_a_bad_event_is_400_with_one_line_of_json(
    tmp_path: Path, data: bytes, code: GateErrorCode
) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, data)
        after = await post(gate, body())
    refused_with(status, text, code, 400)
    assert "Traceback" not in text
    assert gate.sensor.refusals == [(code, "http")]
    assert after[0] == 200


@pytest.mark.parametrize("budget", ["soon", "-5", "0", "nan", "inf", ""])
async def test_a_bad_budget_is_400(tmp_path: Path, budget: str) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, body(), headers(**{"X-Budget-Ms": budget}))
    refused_with(status, text, "bad_budget", 400)


async def test_other_paths_and_methods_answer_one_line_of_json(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate, aiohttp.ClientSession() as http:
        async with http.get(gate.check_url) as response:
            assert response.status == 405 and "POST" in response.headers["Allow"]
            text = await response.text()
            assert "\n" not in text and json.loads(text)["error"] == "method_not_allowed"
        async with http.post(gate.url + "/v2/check", data=b"{}") as response:
            assert response.status == 404
            assert json.loads(await response.text())["error"] == "not_found"


async def test_an_unexpected_error_is_a_500_of_one_line_of_json(tmp_path: Path) -> None:
    async with serving(gate_settings(tmp_path)) as gate:
        broken = mock.AsyncMock(side_effect=RuntimeError("the service is broken"))
        with mock.patch.object(gate.service, "check", broken):
            status, text, _ = await post(gate, body())
            again = await post(gate, body())
    assert status == 500 and "\n" not in text and "Traceback" not in text
    assert json.loads(text)["error"] == "internal_server_error"
    assert again[0] == 500  # still serving


# ------------------------------------------------------------------ the monitored records


@dataclass
class HeldSink:
    """Records what it is asked to publish, and returns only once released."""

    published: list[Sequence[OutboundRecord]] = field(default_factory=list)
    called: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        self.published.append(records)
        self.called.set()
        await self.release.wait()


class FailingSink:
    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        raise ConnectionError("the broker is gone")


async def test_the_reply_does_not_wait_for_the_broker_and_the_records_follow(
    tmp_path: Path,
) -> None:
    sink = HeldSink()
    settings = gate_settings(tmp_path, publish=True)
    async with serving(settings, sink=sink) as gate, aiohttp.ClientSession() as http:
        status, text, _ = await post(gate, body(), headers(traceparent=TRACEPARENT))
        await asyncio.wait_for(sink.called.wait(), 5)  # the sink is held: not acknowledged
        assert gate.outbox is not None and gate.outbox.records > 0
        async with http.get(gate.url + "/readyz") as response:
            ready_while_recent = response.status
        await asyncio.sleep(OUTBOX_LIMITS.stall_s + 0.1)
        async with http.get(gate.url + "/readyz") as response:
            stalled = (response.status, await response.json())
        sink.release.set()
        for _ in range(100):
            if gate.outbox.records == 0:
                break
            await asyncio.sleep(0.01)
        async with http.get(gate.url + "/readyz") as response:
            ready_again = response.status
        assert gate.outbox.published > 0 and gate.outbox.records == 0
    assert status == 200, text
    assert ready_while_recent == 200
    assert stalled[0] == 503 and stalled[1]["reason"] == "broker_unavailable"
    assert ready_again == 200
    [records] = sink.published
    topics = output_topics(settings)
    assert topics.verdicts.name in {record.topic for record in records}
    verdict = next(r for r in records if r.topic == topics.verdicts.name)
    assert verdict.value is not None
    assert json.loads(verdict.value)["answer_id"] == "ans-e1"
    assert ("traceparent", TRACEPARENT.encode()) in verdict.headers
    assert gate.sensor.publish_failures == []


async def test_a_failing_sink_still_replies_and_its_records_are_counted_lost(
    tmp_path: Path,
) -> None:
    async with serving(gate_settings(tmp_path, publish=True), sink=FailingSink()) as gate:
        status, text, _ = await post(gate, body())
        assert gate.outbox is not None
        for _ in range(200):  # 5 attempts, 50 ms apart
            if gate.outbox.records == 0:
                break
            await asyncio.sleep(0.01)
        lost = gate.outbox.lost
    assert status == 200, text
    assert GateReply.model_validate_json(text).decision is Action.PASS
    assert lost > 0 and len(gate.sensor.decided_replies) == 1


async def test_without_publishing_the_sink_is_not_called(tmp_path: Path) -> None:
    sink = HeldSink()
    sink.release.set()
    async with serving(gate_settings(tmp_path), sink=sink) as gate:
        status, _, _ = await post(gate, body())
    assert status == 200 and sink.published == []


# ------------------------------------------------------------------ TLS


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


async def test_tls_round_trip(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    settings = gate_settings(tmp_path, tls_cert=cert, tls_key=key)
    trusted = ssl.create_default_context(cafile=str(cert))
    async with serving(settings) as gate:
        assert gate.url.startswith("https://")
        status, text, _ = await post(gate, body(), ssl_context=trusted)
        with pytest.raises(aiohttp.ClientError):
            async with aiohttp.ClientSession() as http:
                await http.post(f"http://127.0.0.1:{gate.server.port}{CHECK_PATH}", data=body())
    assert status == 200, text
    assert GateReply.model_validate_json(text).answer_text == SUPPORTED


@pytest.mark.parametrize("given", ["tls_cert", "tls_key"])
def test_a_cert_without_its_key_is_a_startup_error(tmp_path: Path, given: str) -> None:
    cert, _ = self_signed(tmp_path)
    settings = gate_settings(tmp_path, **{given: cert})
    service = build_gate(
        settings, telemetry=Telemetry.from_settings(TelemetrySettings()), sensor=RecordingSensor()
    )
    with pytest.raises(GateTlsError, match="set both"):
        GateServer(settings.gate, service, sensor=RecordingSensor(), outbox=None)


def test_an_unreadable_cert_is_a_startup_error(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate")
    settings = gate_settings(tmp_path, tls_cert=tmp_path / "bad.pem", tls_key=tmp_path / "bad.pem")
    service = build_gate(
        settings, telemetry=Telemetry.from_settings(TelemetrySettings()), sensor=RecordingSensor()
    )
    with pytest.raises(GateTlsError, match="cannot load"):
        GateServer(settings.gate, service, sensor=RecordingSensor(), outbox=None)


# ------------------------------------------------------------------ budgets kept


async def test_a_full_outbox_answers_at_once_by_policy_and_keeps_no_record(
    tmp_path: Path,
) -> None:
    sink = HeldSink()  # never released: the broker is away
    settings = gate_settings(
        tmp_path, publish=True, policies=[{"tenant": "t", "policy": "fail-closed"}]
    )
    async with serving(settings, sink=sink) as gate, aiohttp.ClientSession() as http:
        assert gate.outbox is not None
        filler = [OutboundRecord("verdicts", b"k", b"v")] * OUTBOX_LIMITS.max_records
        gate.outbox.put(filler)
        status, text, _ = await post(gate, body(), headers(**{"X-Budget-Ms": "5000"}))
        async with http.get(gate.url + "/readyz") as response:
            ready = (response.status, await response.json())
        refused = gate.outbox.refused
        sink.release.set()
    assert status == 200, text
    reply = GateReply.model_validate_json(text)
    assert reply.reason is not None and reply.reason.value == "OUTBOX_FULL"
    assert (reply.decision, reply.verified, reply.policy) == (Action.WITHHOLD, False, "fail-closed")
    assert reply.latency_ms < 1000
    assert refused > 0
    assert ready[0] == 503 and ready[1]["reason"] == "outbox_full"


async def test_a_callers_bodies_beyond_its_share_are_refused_at_once_not_others(
    tmp_path: Path,
) -> None:
    settings = gate_settings(
        tmp_path, max_caller_body_bytes_in_flight=2600, max_body_bytes_in_flight=100_000
    )
    async with serving(settings) as gate:
        held = gate.server._bodies.reserve("app", 2500)  # one of app's bodies in flight
        assert not isinstance(held, str)
        status, text, response = await post(gate, body())
        other_status, other_text, _ = await post(gate, body(tenant="x"), headers(token=OTHER_TOKEN))
        gate.server._bodies.release(held)
        again, _, _ = await post(gate, body())
    refused_with(status, text, "caller_busy", 429)
    assert response.headers["Retry-After"] == "1"
    assert other_status == 200, other_text
    assert again == 200


async def test_latency_counts_from_the_headers_to_the_reply_written(tmp_path: Path) -> None:
    """A body sent slowly counts in ``latency_ms``: the clock starts before it is read."""

    async def slow_body() -> Any:
        data = body()
        yield data[:10]
        await asyncio.sleep(0.3)
        yield data[10:]

    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, slow_body())
    assert status == 200, text
    assert GateReply.model_validate_json(text).latency_ms >= 300
    [(observed, _)] = gate.sensor.decided_replies
    assert observed.latency_ms >= 300
