"""Hostile requests at ``POST /v1/check``: whatever the body and headers, the reply is a
decision or a refusal of one line of JSON, never a traceback or a 500, and the server
goes on answering a valid request.

The bodies are the judging stage's own fuzz material (random bytes, JSON of the wrong
shape, valid events mutated in every way that file thought of), through a real server
and a real client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamproc.contracts.gate_events import GateError, GateReply
from streamproc.gate.http.auth import caller_stanza
from tests.unit.gate.http.http_gate import OTHER_TOKEN, TOKEN, Gate, body, gate_settings, serving
from tests.unit.verdicts.fuzz_attacks import (
    NUMBERS_AND_TYPES,
    RANDOM_BYTES,
    STRINGS,
    STRUCTURE,
    WRONG_SHAPE,
)
from tests.unit.verdicts.fuzz_events import EVENT

pytestmark = pytest.mark.slow  # seconds: a hypothesis flood through a real server

ALLOWED = {200, 400, 401, 403, 413, 415}
_STATUS_OF = {
    "bad_json": 400,
    "schema_violation": 400,
    "event_time_out_of_range": 400,
    "bad_budget": 400,
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "oversized": 413,
    "unsupported_media_type": 415,
}
_TEN_YEARS_S = 10 * 365 * 24 * 3600.0
"""The fuzz events are dated early 2026: the past bound is widened so they are judged."""

_ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)
_TRACEPARENTS = st.sampled_from(
    [
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
    ]
)
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "Authorization": st.sampled_from(
            [f"Bearer {TOKEN}", f"Bearer {OTHER_TOKEN}", "Bearer ", "Basic x", f"bearer {TOKEN}"]
        )
        | _ASCII,
        "Content-Type": st.sampled_from(
            ["application/json", "application/json; charset=utf-8", "text/plain", "*/*"]
        )
        | _ASCII,
        "X-Budget-Ms": st.sampled_from(["1", "5000", "0", "-1", "nan", "1e400", ""]) | _ASCII,
        "traceparent": _TRACEPARENTS | _ASCII,
        "tracestate": _ASCII,
        "baggage": _ASCII,
        "X-Other": _ASCII,
    },
)
"""Random headers; a valid token and JSON content type much of the time, so bodies are
read."""

_NOW = datetime.now(UTC).isoformat()
FRESH_EVENT = EVENT.map(lambda doc: json.dumps({**doc, "occurred_at": _NOW}).encode())
BODIES = st.one_of(
    RANDOM_BYTES,
    WRONG_SHAPE,
    STRUCTURE,
    STRINGS,
    NUMBERS_AND_TYPES,
    FRESH_EVENT,
    st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=10), max_size=5).map(
        lambda doc: json.dumps(doc).encode()
    ),
).map(lambda raw: raw or b"")

_GOOD_HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fuzz_gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    directory: Path = tmp_path_factory.mktemp("gate-fuzz")
    tokens = directory / "callers.toml"
    # The fuzz events are of tenants t1 and t2: t1 is the caller's, t2 is not (403).
    tokens.write_text(
        caller_stanza("app", ["t", "t1"], TOKEN) + caller_stanza("other", ["x"], OTHER_TOKEN)
    )
    configured = gate_settings(
        None, tokens_file=tokens, worker={"event_time_max_past_s": _TEN_YEARS_S}
    )
    async with serving(configured) as gate:
        yield gate


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def check_reply(status: int, text: str) -> None:
    """One of the allowed statuses, and one line of JSON of the right model."""
    assert status in ALLOWED, (status, text[:500])
    assert "\n" not in text and "Traceback" not in text, text[:500]
    if status == 200:
        GateReply.model_validate_json(text)
    else:
        error = GateError.model_validate_json(text)
        assert _STATUS_OF[error.error] == status, (status, error)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(raw=BODIES, sent=HEADERS)
async def test_any_request_gets_a_decision_or_a_one_line_refusal(
    fuzz_gate: Gate, http: aiohttp.ClientSession, raw: bytes, sent: dict[str, Any]
) -> None:
    async with http.post(fuzz_gate.check_url, data=raw, headers=sent) as response:
        check_reply(response.status, await response.text())
    async with http.post(fuzz_gate.check_url, data=raw, headers=_GOOD_HEADERS) as response:
        check_reply(response.status, await response.text())


async def test_the_server_still_answers_after_the_flood(
    fuzz_gate: Gate, http: aiohttp.ClientSession
) -> None:
    # Its own flood first, so that the test holds whichever worker ran the hypothesis one.
    hostile = [b"", b"{", b"null", b"[]", b'{"answer": 3}', b"\xff\xfe" * 40, b'"x"' * 9]
    refused_before = len(fuzz_gate.sensor.refusals)
    for raw in hostile:
        async with http.post(fuzz_gate.check_url, data=raw, headers=_GOOD_HEADERS) as response:
            check_reply(response.status, await response.text())
            assert response.status != 200, raw
    async with http.post(fuzz_gate.check_url, data=body(), headers=_GOOD_HEADERS) as response:
        assert response.status == 200, await response.text()
        GateReply.model_validate_json(await response.text())
    assert len(fuzz_gate.sensor.refusals) - refused_before == len(hostile)
    assert len(fuzz_gate.sensor.decided_replies) >= 1
