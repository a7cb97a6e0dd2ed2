"""The caller's side of ``/v1/stream``: wrap an answer's text deltas, get the checked text.

    async for text in check_stream(llm_deltas(), event, url=GATE, token=TOKEN, budget_ms=300):
        await send_to_user(text)

:func:`check_stream` sends the event and each delta as it comes and yields the text of
each sentence the gate releases, in order (with the whitespace before it, so the pieces
join to the answer with held sentences left out). It never waits on the gate past a
sentence's budget: it cuts the sentences itself (the gate's own cut), and a sentence
with no decision ``budget_ms + grace_ms`` after it was complete is decided by the
policy - fail-open releases it, fail-closed holds it - and a late decision is ignored.
If the gate cannot be reached, or the connection fails mid-stream, every sentence from
then on is decided by the policy at once. After the loop, :attr:`CheckedStream.final`
holds the gate's final (None when it did not come in time) and
:attr:`CheckedStream.by_policy` the sentences the client decided itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog

from streamproc.contracts.gate_events import FailurePolicy
from streamproc.contracts.gate_stream_events import STREAM_PATH, StreamFinal, StreamSentence
from streamproc.gate.stream_sentences import SentenceStream, StreamedSentence

__all__ = ["CheckedStream", "check_stream"]

log = structlog.get_logger(__name__)

_GRACE_MS = 100.0


@dataclass(slots=True)
class _Pending:
    sentence: StreamedSentence
    due: float


@dataclass(slots=True)
class CheckedStream:
    """What a :func:`check_stream` loop ended with."""

    final: StreamFinal | None = None
    sentences: list[StreamSentence] = field(default_factory=list)
    """The gate's decisions that came in time."""
    by_policy: list[int] = field(default_factory=list)
    """Sentences decided by the client's policy (no decision in time, or no gate)."""
    released: list[int] = field(default_factory=list)


def check_stream(
    deltas: AsyncIterable[str],
    event: Mapping[str, Any],
    *,
    url: str,
    token: str,
    budget_ms: float = 500.0,
    policy: FailurePolicy = "fail-open",
    grace_ms: float = _GRACE_MS,
    session: aiohttp.ClientSession | None = None,
    traceparent: str | None = None,
    outcome: CheckedStream | None = None,
) -> AsyncIterator[str]:
    """Yield the released text of the answer ``deltas`` write; see the module doc.
    ``event``: the answer event without its answer (its evidence, question, tenant and
    ids); ``url``: the gate's base URL; ``outcome``: filled in as the stream goes."""
    run = _Run(deltas, event, url, token, budget_ms, policy, grace_ms, traceparent)
    return run.texts(session, outcome if outcome is not None else CheckedStream())


class _Run:
    def __init__(
        self,
        deltas: AsyncIterable[str],
        event: Mapping[str, Any],
        url: str,
        token: str,
        budget_ms: float,
        policy: FailurePolicy,
        grace_ms: float,
        traceparent: str | None,
    ) -> None:
        self._deltas = deltas
        self._event = {**event, "answer": ""}
        self._url = url.rstrip("/") + STREAM_PATH
        self._headers = {"Authorization": f"Bearer {token}"}
        if traceparent:
            self._headers["traceparent"] = traceparent
        self._budget_ms = budget_ms
        self._wait_s = (budget_ms + grace_ms) / 1000
        self._policy = policy
        self._sentences = SentenceStream()
        self._pending: list[_Pending] = []
        self._decided: dict[int, StreamSentence] = {}
        self._written = asyncio.Event()
        self._sent_all = False
        self._gate_gone = False
        self._previous_end = 0

    async def texts(
        self, session: aiohttp.ClientSession | None, outcome: CheckedStream
    ) -> AsyncIterator[str]:
        own = session is None
        http = session or aiohttp.ClientSession()
        try:
            ws = await self._connect(http)
            sender = asyncio.create_task(self._send(ws))
            reader = asyncio.create_task(self._read(ws, outcome)) if ws is not None else None
            try:
                async for text in self._release(outcome):
                    yield text
                if ws is not None and reader is not None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(reader), self._wait_s)
            finally:
                for task in (sender, reader):
                    if task is not None:
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                if ws is not None:
                    await ws.close()
        finally:
            if own:
                await http.close()

    async def _connect(self, http: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse | None:
        try:
            ws = await asyncio.wait_for(
                http.ws_connect(self._url, headers=self._headers), self._wait_s
            )
            start = {"type": "start", "event": self._event, "budget_ms": self._budget_ms}
            await ws.send_str(json.dumps(start))
            return ws
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("gate_stream_unreachable", error=repr(exc)[:200])
            self._gate_gone = True
            return None

    async def _send(self, ws: aiohttp.ClientWebSocketResponse | None) -> None:
        """Forward the deltas as they come; cut sentences as the gate will."""
        async for delta in self._deltas:
            if not delta:
                continue
            self._complete(self._sentences.feed(delta))
            if ws is not None and not self._gate_gone:
                try:
                    await ws.send_str(json.dumps({"type": "delta", "text": delta}))
                except (ConnectionError, RuntimeError, aiohttp.ClientError):
                    self._gate_gone = True
        self._complete(self._sentences.end())
        self._sent_all = True
        self._written.set()
        if ws is not None and not self._gate_gone:
            with contextlib.suppress(ConnectionError, RuntimeError, aiohttp.ClientError):
                await ws.send_str('{"type": "end"}')

    def _complete(self, sentences: list[StreamedSentence]) -> None:
        due = time.monotonic() + self._wait_s
        self._pending += [_Pending(s, due) for s in sentences]
        if sentences:
            self._written.set()

    async def _read(self, ws: aiohttp.ClientWebSocketResponse, outcome: CheckedStream) -> None:
        try:
            async for message in ws:
                if message.type is not aiohttp.WSMsgType.TEXT:
                    break
                data = json.loads(message.data)
                if data.get("type") == "sentence":
                    sentence = StreamSentence.model_validate(data)
                    self._decided[sentence.index] = sentence
                    self._written.set()
                elif data.get("type") == "final":
                    outcome.final = StreamFinal.model_validate(data)
                    return
                else:
                    log.warning("gate_stream_refused", message=str(data)[:300])
                    break
        except (aiohttp.ClientError, ValueError) as exc:
            log.warning("gate_stream_failed", error=repr(exc)[:200])
        self._gate_gone = True
        self._written.set()

    async def _release(self, outcome: CheckedStream) -> AsyncIterator[str]:
        """Decide the sentences in order: the gate's decision, or the policy's at due."""
        while True:
            while self._pending:
                first = self._pending[0]
                index = first.sentence.index
                decided = self._decided.get(index)
                if decided is not None:
                    outcome.sentences.append(decided)
                    release = decided.decision == "release"
                elif self._gate_gone or time.monotonic() >= first.due:
                    outcome.by_policy.append(index)
                    release = self._policy == "fail-open"
                else:
                    break
                self._pending.pop(0)
                text = self._sentences.text[self._previous_end : first.sentence.end]
                self._previous_end = first.sentence.end
                if release:
                    outcome.released.append(index)
                    yield text
            if self._sent_all and not self._pending:
                return
            self._written.clear()
            timeout = self._pending[0].due - time.monotonic() if self._pending else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._written.wait(), timeout)
