"""The gate over HTTP, a real server on a free port and a real client: a decision round
trip, the probes, and HTTPS (a round trip, and the certificate mistakes found at startup).
Refusals are in test_server_refusals.py, the published records in test_server_records.py."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

from streamproc.contracts.events import Action
from streamproc.contracts.gate_events import GateReply
from streamproc.gate.http.server import CHECK_PATH, GateServer, GateTlsError
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_gate
from tests.unit.gate.http.http_gate import (
    SUPPORTED,
    TRACE_ID,
    TRACEPARENT,
    RecordingSensor,
    body,
    gate_settings,
    headers,
    post,
    refused_with,
    self_signed,
    serving,
)

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


# ------------------------------------------------------------------ TLS


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
