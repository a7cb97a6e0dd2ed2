"""``check_stream``, the caller's helper for ``/v1/stream``: the released text of a real
gate, and the policy applied by the client when the gate is unreachable or silent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from streamproc.contracts.gate_events import FailurePolicy
from streamproc.gate.client import CheckedStream, check_stream
from tests.unit.gate.conftest import event
from tests.unit.gate.http.http_gate import TOKEN, gate_settings, serving

ANSWER = (
    "The supplier delivered 80 of 100 pieces. Incomplete orders cannot be billed. "
    "The supplier delivered 90 of 100 pieces."
)


async def _words(text: str, pause_s: float = 0.0) -> AsyncIterator[str]:
    for i, word in enumerate(text.split(" ")):
        yield word if i == 0 else " " + word
        if pause_s:
            await asyncio.sleep(pause_s)


async def _collect(
    url: str, policy: FailurePolicy, outcome: CheckedStream, budget_ms: float = 200
) -> str:
    pieces = [
        text
        async for text in check_stream(
            _words(ANSWER),
            event(""),
            url=url,
            token=TOKEN,
            budget_ms=budget_ms,
            grace_ms=50,
            policy=policy,
            outcome=outcome,
        )
    ]
    return "".join(pieces)


async def test_the_helper_yields_what_the_gate_releases(tmp_path: Path) -> None:
    outcome = CheckedStream()
    async with serving(gate_settings(tmp_path)) as gate:
        text = await _collect(gate.url, "fail-open", outcome, budget_ms=30_000)
    assert text == " Incomplete orders cannot be billed. The supplier delivered 90 of 100 pieces."
    assert outcome.by_policy == [] and outcome.released == [1, 2]
    assert outcome.final is not None and outcome.final.answer_text == text.strip()


@pytest.mark.parametrize(("policy", "shown"), [("fail-open", ANSWER), ("fail-closed", "")])
async def test_an_unreachable_gate_is_decided_by_the_policy(
    policy: FailurePolicy, shown: str
) -> None:
    outcome = CheckedStream()
    text = await _collect("http://127.0.0.1:9", policy, outcome)
    assert text == shown
    assert outcome.by_policy == [0, 1, 2] and outcome.final is None


@pytest.mark.parametrize(("policy", "shown"), [("fail-open", ANSWER), ("fail-closed", "")])
async def test_a_silent_gate_is_decided_by_the_policy_within_the_budget(
    policy: FailurePolicy, shown: str
) -> None:
    async def silent(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for _ in ws:
            pass  # reads everything, decides nothing
        return ws

    app = web.Application()
    app.router.add_get("/v1/stream", silent)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    outcome = CheckedStream()
    try:
        started = asyncio.get_running_loop().time()
        text = await _collect(f"http://127.0.0.1:{port}", policy, outcome)
        took = asyncio.get_running_loop().time() - started
    finally:
        await runner.cleanup()
    assert text == shown and outcome.by_policy == [0, 1, 2]
    assert took < 5  # each sentence waits its budget (0.25 s), never the gate
