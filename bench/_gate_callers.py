"""How the load generator reaches the gate: one caller per path (``POST /v1/check``
over HTTP, or the gate client on Kafka), each reducing what came back to a
:class:`Reply`. Changes when the gate's wire format or client does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from streamproc.config import Settings
from streamproc.contracts.gate_events import BUDGET_HEADER

__all__ = ["CHECK_PATH", "Caller", "HttpCaller", "KafkaCaller", "Reply", "reply_of"]

CHECK_PATH = "/v1/check"


@dataclass(frozen=True, slots=True)
class Reply:
    """What a caller got back for one request; ``error`` set when it got no decision."""

    decision: str | None = None
    verified: bool | None = None
    reason: str | None = None
    gate_latency_ms: float | None = None
    budget_ms: float | None = None
    judge_ms: float | None = None
    """The verdict's judge time: the whole judge call of the batch it was judged in."""
    batch_size: int | None = None
    error: str | None = None


def reply_of(payload: Mapping[str, Any]) -> Reply:
    """A :class:`~streamproc.contracts.gate_events.GateReply` as JSON, reduced to what is
    counted."""
    timings = (payload.get("verdict") or {}).get("timings") or {}
    return Reply(
        decision=str(payload["decision"]),
        verified=bool(payload["verified"]),
        reason=None if payload.get("reason") is None else str(payload["reason"]),
        gate_latency_ms=float(payload["latency_ms"]),
        budget_ms=float(payload["budget_ms"]),
        judge_ms=None if timings.get("judge_ms") is None else float(timings["judge_ms"]),
        batch_size=None if timings.get("batch_size") is None else int(timings["batch_size"]),
    )


class Caller(Protocol):
    """One way into the gate."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def check(self, body: bytes, budget_ms: float | None) -> Reply: ...


class HttpCaller:
    """``POST /v1/check`` with aiohttp, a bearer token, ``X-Budget-Ms`` when given."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float) -> None:
        self._url = base_url.rstrip("/") + CHECK_PATH
        self._token = token
        self._timeout_s = timeout_s
        self._session: Any = None

    async def start(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),  # open loop: no client-side queue
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def check(self, body: bytes, budget_ms: float | None) -> Reply:
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
        if budget_ms is not None:
            headers[BUDGET_HEADER] = f"{budget_ms:g}"
        try:
            async with self._session.post(self._url, data=body, headers=headers) as response:
                payload = await response.read()
                if response.status != 200:
                    return Reply(error=f"http {response.status}: {payload[:200]!r}")
                return reply_of(json.loads(payload))
        except TimeoutError:
            return Reply(error="timeout")
        except Exception as error:  # noqa: BLE001 - counted as unanswered, the run goes on
            return Reply(error=f"{type(error).__name__}: {error}")


class KafkaCaller:
    """``streamproc.gate.client.GateClient`` on the gate's request topic, replies on a
    topic of this run's own. The client never waits past the budget: when no reply came
    in time it decides by policy itself; such a decision counts as unanswered (by the
    gate), under the error ``client_policy``. Requests carry the run's caller token, as
    the gate requires of Kafka requests by default."""

    def __init__(self, settings: Settings, token: str, *, default_budget_ms: float) -> None:
        self._settings = settings
        self._token = token
        self._default_budget_ms = default_budget_ms
        self._client: Any = None

    async def start(self) -> None:
        from streamproc.wiring import gate_client

        # The run's own reply topic, which is the gate's default one: always allowed.
        self._client = gate_client(self._settings, token=self._token)
        await self._client.start()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.stop()

    async def check(self, body: bytes, budget_ms: float | None) -> Reply:
        budget = self._default_budget_ms if budget_ms is None else budget_ms
        try:
            decided = await self._client.check(body, budget_ms=budget)
        except Exception as error:  # noqa: BLE001 - counted as unanswered, the run goes on
            return Reply(error=f"{type(error).__name__}: {error}")
        if decided.reply is None:
            refused = "" if decided.error is None else f" (gate refused: {decided.error.error})"
            return Reply(error=f"client_policy: {decided.reason}{refused}")
        return reply_of(decided.reply.model_dump(mode="json"))
