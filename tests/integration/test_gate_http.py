"""The gate as a user runs it: ``streamproc gate serve`` in its own process on real Kafka,
called by a real HTTP client with a bearer token.

- A generous budget: the default judge (the project's own NLI verifier) checks the answer,
  ``verified: true``, and the monitored verdict is on the verdicts topic, once, carrying
  the caller's trace id; the audit record names the HTTP origin.
- A budget too small for the model: ``verified: false`` with ``BUDGET_EXCEEDED``, decided
  by each tenant's policy (fail-open passes, fail-closed withholds).
- The refusals a stranger meets first: no token 401, another tenant's token 403, not JSON
  400 - one line of JSON each, and the gate keeps serving.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.gate_events import GateError, GateReply
from tests.integration.run_settings import run_settings

TOKEN = "integration-gate-token"
OTHER_TOKEN = "integration-other-tenant"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
EVIDENCE = (
    "Order 7 left the Leeds warehouse on 3 March and was delivered to the customer in York "
    "on 5 March. The parcel weighed 4 kg and was signed for by the customer."
)
ANSWER = "Order 7 was delivered to the customer in York on 5 March. The parcel weighed 4 kg."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _event(event_id: str, tenant: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "c1",
        "tenant": tenant,
        "assistant_id": "support-bot",
        "model": "m1",
        "occurred_at": datetime.now(UTC).isoformat(),
        "question": "Where is order 7?",
        "answer": ANSWER,
        "evidence": [{"id": "D1", "text": EVIDENCE}],
    }


@contextmanager
def running_gate(
    kafka_bootstrap: str, directory: Path, run: str, **gate: Any
) -> Iterator[tuple[str, Settings]]:
    """``streamproc gate serve`` in its own process, callers "shop" (tenants open and
    closed, fail-closed) and "other" (tenant elsewhere); its URL and settings."""
    tokens = directory / "tokens.toml"
    tokens.write_text(
        "".join(
            f'[[caller]]\nname = "{name}"\ntenants = {json.dumps(tenants)}\n'
            f'token_sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\n\n'
            for name, tenants, token in (
                ("shop", ["open", "closed"], TOKEN),
                ("other", ["elsewhere"], OTHER_TOKEN),
            )
        )
    )
    port = _free_port()
    settings = run_settings(
        kafka_bootstrap,
        run,
        partitions=1,
        gate={
            "port": port,
            "tokens_file": str(tokens),
            "policies": [{"tenant": "closed", "policy": "fail-closed"}],
            "requests_topic": f"{run}-{port}.requests",
            **gate,
        },
    )
    process = WorkerProcess(settings, directory / "gate.log", command=("gate", "serve"))
    process.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, timeout_s=120)
        yield url, settings
    finally:
        code = process.stop()
        assert code == 0, f"the gate exited {code}:\n{process.log_tail()}"


@pytest.fixture()
def gate(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[str, Settings]]:
    with running_gate(kafka_bootstrap, tmp_path, "gate-http") as served:
        yield served


def _wait_ready(url: str, process: WorkerProcess, *, timeout_s: float) -> None:
    async def ready() -> bool:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{url}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as reply,
            ):
                return reply.status == 200
        except aiohttp.ClientError:
            return False

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.running, f"the gate exited:\n{process.log_tail()}"
        if asyncio.run(ready()):
            return
        time.sleep(0.5)
    raise AssertionError(f"the gate was not ready in {timeout_s} s:\n{process.log_tail()}")


async def _check(
    url: str, body: bytes, *, token: str | None = TOKEN, **headers: str
) -> tuple[int, str]:
    sent = {"Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/check", data=body, headers=sent) as reply,
    ):
        return reply.status, await reply.text()


async def _read(
    settings: Settings, topic: str, done: Callable[[list[Any]], bool], timeout_s: float = 30
) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen: list[Any] = []
    try:
        deadline = time.monotonic() + timeout_s
        while not done(seen) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen.extend(records)
        # a little longer, so a duplicate would show
        for records in (await consumer.getmany(timeout_ms=1000)).values():
            seen.extend(records)
    finally:
        await consumer.stop()
    return seen


async def test_a_checked_answer_is_verified_and_monitored_with_the_callers_trace(
    gate: tuple[str, Settings],
) -> None:
    url, settings = gate
    body = json.dumps(_event("g1", "open")).encode()
    status, text = await _check(url, body, **{"X-Budget-Ms": "20000", "traceparent": TRACEPARENT})
    assert status == 200, text
    assert "\n" not in text.strip()
    reply = GateReply.model_validate_json(text)
    assert reply.verified and reply.reason is None
    assert reply.decision.value == "pass", reply
    assert reply.answer_text == ANSWER
    assert reply.verdict.answer_id == "ans-g1"
    assert 0 < reply.latency_ms <= 20_000

    verdicts = await _read(settings, settings.topics.verdicts, lambda seen: len(seen) >= 1)
    assert len(verdicts) == 1, "published once"
    [record] = verdicts
    assert json.loads(record.value)["answer_id"] == "ans-g1"
    traceparent = dict(record.headers)["traceparent"].decode()
    assert traceparent.split("-")[1] == TRACE_ID
    # Audit records are keyed tenant/answer_id (the topic is compacted).
    audits = await _read(
        settings, settings.audit.topic, lambda seen: any(a.key == b"open/ans-g1" for a in seen)
    )
    [audit] = [json.loads(a.value) for a in audits if a.key == b"open/ans-g1"]
    assert audit["origin"] == {"topic": "gate.http", "partition": -1, "offset": -1}
    assert audit["trace_id"] == TRACE_ID


async def test_a_budget_too_small_is_unverified_and_decided_by_each_tenants_policy(
    gate: tuple[str, Settings],
) -> None:
    url, _ = gate
    replies = {}
    for tenant in ("open", "closed"):
        body = json.dumps(_event(f"tiny-{tenant}", tenant)).encode()
        status, text = await _check(url, body, **{"X-Budget-Ms": "1"})
        assert status == 200, text
        replies[tenant] = GateReply.model_validate_json(text)
    for reply in replies.values():
        assert not reply.verified
        assert reply.reason is not None and reply.reason.value == "BUDGET_EXCEEDED"
    assert (replies["open"].decision.value, replies["open"].policy) == ("pass", "fail-open")
    assert replies["open"].answer_text == ANSWER
    assert (replies["closed"].decision.value, replies["closed"].policy) == (
        "withhold",
        "fail-closed",
    )
    assert replies["closed"].answer_text == ""


async def test_refusals_are_one_line_of_json_and_the_gate_keeps_serving(
    gate: tuple[str, Settings],
) -> None:
    url, _ = gate
    body = json.dumps(_event("r1", "open")).encode()
    for sent, token, status_expected, code in (
        (body, None, 401, "unauthorized"),
        (body, OTHER_TOKEN, 403, "forbidden"),
        (b"{not json", TOKEN, 400, "bad_json"),
    ):
        status, text = await _check(url, sent, token=token)
        assert status == status_expected, text
        assert text.count("\n") <= 1
        assert GateError.model_validate_json(text).error == code
    status, text = await _check(url, body, **{"X-Budget-Ms": "20000"})
    assert status == 200 and GateReply.model_validate_json(text).verified
