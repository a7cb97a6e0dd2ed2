"""The streaming gate's load generator: answers cut into tokens, written to ``GET
/v1/stream`` at an LLM's pace, every send and every message timed, so that each
sentence's release can be measured from the client's side. Changes when the stream's
protocol or the way an LLM writes is modelled does; what the records mean is
:mod:`bench._stream_gate_summary`'s business.

A token is a word with the whitespace after it (``\\S+\\s*``; the answer's leading
whitespace, if any, goes with its first word): whole words make the sentence boundary the
gate waits for (the next sentence's first whole word) arrive with one delta, as it does
from an LLM whose tokens are mostly words or word-starts.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench._answer_pool import Answers
from streamproc.contracts.gate_stream_events import STREAM_PATH
from streamproc.gate.stream_sentences import SentenceStream

__all__ = [
    "FINAL_WAIT_S",
    "Message",
    "StreamPlan",
    "StreamRecord",
    "check_payloads",
    "plan_streams",
    "replay",
    "run_stream",
    "tokenise",
]

FINAL_WAIT_S = 10.0
"""A stream with no final this long after its end plus its budget counts as unanswered."""
_TOKEN = re.compile(r"\S+\s*")


def tokenise(text: str) -> list[str]:
    """Word-with-trailing-space tokens that join back to exactly ``text``."""
    tokens = _TOKEN.findall(text)
    if not tokens:
        return [text] if text else []
    lead = text[: len(text) - len(text.lstrip())]
    tokens[0] = lead + tokens[0]
    assert "".join(tokens) == text
    return tokens


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """One answer to stream: when it starts, its tokens and pace, and for each sentence
    the delta holding its last character and the delta that completes it (the one with
    the next sentence's first whole word; ``len(tokens)``: the ``end``)."""

    index: int
    arrival_s: float
    tokens_per_s: float
    tokens: list[str]
    event: dict[str, Any]
    last_char: list[int]
    completes: list[int]

    @property
    def writing_s(self) -> float:
        """From the first token to the last (and the ``end`` right after it)."""
        return max(len(self.tokens) - 1, 0) / self.tokens_per_s

    def whole_body(self) -> bytes:
        """The whole answer event: what ``/v1/check`` is sent."""
        return json.dumps({**self.event, "answer": "".join(self.tokens)}).encode()


def _sentence_map(tokens: Sequence[str]) -> tuple[list[int], list[int]]:
    """Where each sentence ends and what completes it, read with the gate's own
    :class:`SentenceStream` (so the boundaries are the gate's, delta for delta)."""
    ends = [0]
    for token in tokens:
        ends.append(ends[-1] + len(token))
    stream = SentenceStream()
    last_char: list[int] = []
    completes: list[int] = []
    for position in range(len(tokens) + 1):
        done = stream.end() if position == len(tokens) else stream.feed(tokens[position])
        for sentence in done:
            # The delta whose span holds the sentence's last character.
            last_char.append(bisect.bisect_right(ends, sentence.end - 1) - 1)
            completes.append(position)
    return last_char, completes


def plan_streams(
    answers: Answers,
    schedule: Sequence[float],
    tokens_per_s: tuple[float, float],
    seed: int,
    cap_s: float | None = None,
) -> list[StreamPlan]:
    """One plan per arrival, the next answers of the pool, each with a pace drawn
    uniformly from ``tokens_per_s`` (seeded). ``cap_s``: an answer is cut to what its
    pace writes in that long (the open-streams check)."""
    rng = random.Random(seed)
    plans = []
    for index, arrival in enumerate(schedule):
        event = json.loads(answers.take()[2])
        pace = rng.uniform(*tokens_per_s)
        tokens = tokenise(event.pop("answer"))
        if cap_s is not None:
            tokens = tokens[: max(1, int(cap_s * pace) + 1)]
        last_char, completes = _sentence_map(tokens)
        plans.append(
            StreamPlan(index, arrival, pace, tokens, {**event, "answer": ""}, last_char, completes)
        )
    return plans


def check_payloads(plans: Sequence[StreamPlan]) -> tuple[list[float], list[tuple[int, bytes]]]:
    """``/v1/check``'s open loop on the same answers: each sent whole when its stream
    would have sent its ``end``; (offsets, (plan index, body)) in send order."""
    ordered = sorted(plans, key=lambda p: p.arrival_s + p.writing_s)
    return (
        [p.arrival_s + p.writing_s for p in ordered],
        [(p.index, p.whole_body()) for p in ordered],
    )


@dataclass(frozen=True, slots=True)
class Message:
    """A message from the gate, when it arrived (monotonic s), reduced to what counts."""

    at: float
    type: str
    index: int | None = None
    decision: str | None = None
    verified: bool | None = None
    reason: str | None = None
    gate_latency_ms: float | None = None
    error: str | None = None
    withdrawn: int = 0


def _message(at: float, text: str) -> Message:
    data = json.loads(text)
    return Message(
        at=at,
        type=str(data.get("type")),
        index=data.get("index"),
        decision=data.get("decision"),
        verified=data.get("verified"),
        reason=data.get("reason"),
        gate_latency_ms=data.get("latency_ms"),
        error=data.get("error"),
        withdrawn=len(data.get("withdrawn") or ()),
    )


@dataclass(slots=True)
class StreamRecord:
    """One stream as the client saw it: ``due`` is its scheduled start, ``sent[k]`` the
    send time of delta ``k`` (``sent[len(tokens)]``: the ``end``), all monotonic s."""

    plan: StreamPlan
    due: float
    opened: float | None = None
    sent: list[float] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    failure: str | None = None
    """Why no final came: a refusal's code, a lost connection, ``unanswered``."""


async def run_stream(
    session: Any, url: str, token: str, plan: StreamPlan, budget_ms: float, due: float
) -> StreamRecord:
    """Stream ``plan`` from ``due``: connect, ``start``, one delta per token paced from
    the start's send, ``end`` right after the last token, then await the final."""
    record = StreamRecord(plan, due)
    delay = due - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        ws = await session.ws_connect(url + STREAM_PATH, headers=headers, autoping=True)
    except Exception as error:  # noqa: BLE001 - counted as a failed stream, the run goes on
        record.failure = f"connect: {type(error).__name__}"
        return record
    reader = asyncio.create_task(_read(ws, record))
    try:
        start = {"type": "start", "event": plan.event, "budget_ms": budget_ms}
        await ws.send_str(json.dumps(start))
        record.opened = begin = time.monotonic()
        for k, piece in enumerate(plan.tokens):
            wait = begin + k / plan.tokens_per_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if reader.done():
                break  # refused: nothing more to send
            record.sent.append(time.monotonic())
            await ws.send_str(json.dumps({"type": "delta", "text": piece}))
        if not reader.done():
            record.sent.append(time.monotonic())
            await ws.send_str('{"type":"end"}')
        await asyncio.wait_for(asyncio.shield(reader), budget_ms / 1000 + FINAL_WAIT_S)
    except TimeoutError:
        record.failure = record.failure or "unanswered"
    except Exception as error:  # noqa: BLE001 - counted as a failed stream, the run goes on
        record.failure = record.failure or f"{type(error).__name__}: {error}"
    finally:
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader
        with contextlib.suppress(Exception):
            await ws.close()
    if record.failure is None and not any(m.type == "final" for m in record.messages):
        record.failure = "closed without a final"
    return record


async def _read(ws: Any, record: StreamRecord) -> None:
    """Every message, stamped on arrival, until the final, an error or the close."""
    import aiohttp

    async for received in ws:
        at = time.monotonic()
        if received.type is not aiohttp.WSMsgType.TEXT:
            break
        message = _message(at, received.data)
        record.messages.append(message)
        if message.type == "error":
            record.failure = f"refused: {message.error}"
            return
        if message.type == "final":
            return


async def replay(
    url: str, token: str, plans: Sequence[StreamPlan], budget_ms: float
) -> list[StreamRecord]:
    """Every plan started at its arrival (an open loop: whatever the gate does), as a
    task of its own; then every stream awaited."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0)  # open loop: no client-side queue
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.monotonic()
        tasks = [
            asyncio.create_task(
                run_stream(session, url, token, plan, budget_ms, start + plan.arrival_s)
            )
            for plan in plans
        ]
        return list(await asyncio.gather(*tasks))
