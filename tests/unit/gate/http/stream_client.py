"""A plain WebSocket client of ``/v1/stream`` for the gate's tests: send a start, the
deltas and an end, and keep every message the gate sends and its close code."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from streamproc.contracts.gate_stream_events import (
    STREAM_PATH,
    StreamError,
    StreamFinal,
    StreamSentence,
)


@dataclass
class Streamed:
    """What came back over one stream."""

    sentences: list[StreamSentence] = field(default_factory=list)
    final: StreamFinal | None = None
    error: StreamError | None = None
    close_code: int | None = None
    order: list[str] = field(default_factory=list)

    @property
    def released(self) -> str:
        return " ".join(s.text for s in self.sentences if s.decision == "release")


GENEROUS_MS = 30_000.0
"""The budget of a test about decisions, not time: a starved test process still has it."""


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def stream(
    url: str,
    event: dict[str, Any],
    deltas: Sequence[str | bytes],
    *,
    token: str | None,
    budget_ms: float | None = GENEROUS_MS,
    end: bool = True,
    headers: dict[str, str] | None = None,
) -> Streamed:
    """Stream ``deltas`` (a ``bytes`` item is sent as a raw text frame) and read to the
    close; ``budget_ms`` None: the gate's default."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    got = Streamed()
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url + STREAM_PATH, headers=sent) as ws,
    ):
        start: dict[str, Any] = {"type": "start", "event": event}
        if budget_ms is not None:
            start["budget_ms"] = budget_ms
        await ws.send_str(json.dumps(start))
        for delta in deltas:
            if ws.closed:
                break
            if isinstance(delta, bytes):
                await ws.send_str(delta.decode())
            else:
                await ws.send_str(json.dumps({"type": "delta", "text": delta}))
        if end and not ws.closed:
            await ws.send_str('{"type": "end"}')
        async for message in ws:
            if message.type is not aiohttp.WSMsgType.TEXT:
                break
            _keep(got, message.data)
        got.close_code = ws.close_code
    return got


def _keep(got: Streamed, data: str) -> None:
    kind = json.loads(data)["type"]
    got.order.append(kind)
    if kind == "sentence":
        got.sentences.append(StreamSentence.model_validate_json(data))
    elif kind == "final":
        got.final = StreamFinal.model_validate_json(data)
    else:
        got.error = StreamError.model_validate_json(data)


def same_decision(final: StreamFinal, reply: Any) -> None:
    """The final is /v1/check's reply for the whole answer, apart from timings."""
    assert final.decision == reply.decision
    assert final.verified == reply.verified
    assert final.reason == reply.reason
    assert final.answer_text == reply.answer_text
    assert final.policy == reply.policy and final.budget_ms == reply.budget_ms
    timeless = {"judged_at", "timings"}
    assert final.verdict.model_dump(exclude=timeless) == reply.verdict.model_dump(exclude=timeless)
