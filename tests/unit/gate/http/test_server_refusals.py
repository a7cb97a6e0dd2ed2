"""The gate over HTTP refuses, in order and each with its one-line JSON body: callers
without a valid token or for another tenant, bodies that are not JSON, too large or
malformed, bad budgets, unknown paths; an unexpected error is a 500 of one line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from unittest import mock

import aiohttp
import pytest

from streamproc.contracts.gate_events import GateErrorCode
from streamproc.gate.http.server import CHECK_PATH, GateServer
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.web.token_file import TokensFileError, new_token
from streamproc.wiring import build_gate
from tests.unit.gate.conftest import event
from tests.unit.gate.http.http_gate import (
    OTHER_TOKEN,
    SMALL_LIMIT,
    SUPPORTED,
    TOKEN,
    RecordingSensor,
    body,
    gate_settings,
    headers,
    post,
    refused_with,
    serving,
)

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
