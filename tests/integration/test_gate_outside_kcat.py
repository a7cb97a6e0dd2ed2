"""The gate as outside callers meet it, killed mid-stream (the trial that was
scripts/try_gate_outside.sh; RELIABILITY.md, "The inline gate").

``streamproc gate serve`` runs in a process of its own, publishing, with a tokens file.
An HTTP caller checks one answer in its own trace. kcat (librdkafka) sends requests the
way a caller on another stack would - one record each, with ``reply-topic``,
``correlation-id``, ``authorization``, ``x-budget-ms`` and ``traceparent`` headers, in
zstd, lz4 and snappy - and five hostile ones: no reply route, an internal reply topic, a
reply topic not allowed, truncated JSON and a negative budget. The gate is killed with
SIGKILL right after a batch of requests and more are sent while it is down; a new gate
process joins the same group. What a ``read_committed`` reader (kcat again) finds: every
request with a usable reply route has exactly one reply, every answer exactly one
verdict (in its caller's trace), and every hostile request one dead letter with its bytes.
With ``gate.kafka_reply = "immediate"`` a reply sent before its transaction committed may
be sent again by the next gate (the caller keeps the first): at least one reply each,
still one verdict.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, Verdict
from streamproc.contracts.gate_events import (
    AUTHORIZATION_HEADER,
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    GateError,
    GateReply,
)
from tests.integration.kcat import kcat_or_skip
from tests.integration.outside import TRACE_ID, TRACEPARENT, example_answers, read_committed
from tests.integration.run_settings import run_settings

TOKEN = "integration-kcat-caller"
PARTITIONS = 3
WAIT_S = 120.0
BATCH = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(bootstrap: str, tokens: Path, kafka_reply: str) -> Settings:
    return run_settings(
        bootstrap,
        "kcat-gate",
        partitions=PARTITIONS,
        judge={"name": "rules"},
        gate={"port": _free_port(), "tokens_file": str(tokens), "kafka_reply": kafka_reply},
        worker={
            "rebalance_timeout_s": 10.0,
            "session_timeout_s": 6.0,
            "transaction_timeout_s": 10.0,
        },
    )


def _tokens(path: Path, tenant: str) -> Path:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    caller = f'[[caller]]\nname = "shop"\ntenants = ["{tenant}"]\n'
    path.write_text(caller + f'token_sha256 = "{digest}"\n')
    return path


def _request(
    kcat: str,
    bootstrap: str,
    topic: str,
    body: bytes,
    *,
    codec: str = "none",
    partition: int = 0,
    headers: dict[str, str],
) -> None:
    """One request record from kcat, keyed by its correlation id when it has one."""
    command = [kcat, "-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-z", codec]
    command += ["-X", "acks=all"]
    if CORRELATION_ID_HEADER in headers:
        command += ["-k", headers[CORRELATION_ID_HEADER]]
    for name, value in headers.items():
        command += ["-H", f"{name}={value}"]
    done = subprocess.run(command, input=body + b"\n", capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


async def _ready(url: str, gate: WorkerProcess, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            assert gate.running, f"the gate exited:\n{gate.log_tail(60)}"
            try:
                async with session.get(f"{url}/readyz", timeout=aiohttp.ClientTimeout(2)) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
    pytest.fail(f"the gate was not ready in {timeout_s:.0f} s:\n{gate.log_tail(60)}")


async def _until(what: str, done: Callable[[], bool], gate: WorkerProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if await asyncio.to_thread(done):
            return
        assert gate.running, f"the gate exited before {what}:\n{gate.log_tail(60)}"
        await asyncio.sleep(0.5)
    pytest.fail(f"no {what} after {WAIT_S:.0f} s:\n{gate.log_tail(60)}", pytrace=False)


@pytest.mark.parametrize("kafka_reply", ["in-transaction", "immediate"])
async def test_a_gate_killed_mid_stream_gives_each_kcat_request_one_reply_and_one_verdict(
    kafka_bootstrap: str, tmp_path: Path, kafka_reply: str
) -> None:
    kcat = kcat_or_skip()
    answers = example_answers("gk", range(3 * BATCH))
    tenant = json.loads(next(iter(answers.values())))["tenant"]
    settings = _settings(kafka_bootstrap, _tokens(tmp_path / "tokens.toml", tenant), kafka_reply)
    gate_settings, topics = settings.gate, settings.topics
    url = f"http://127.0.0.1:{gate_settings.port}"
    requests_topic, replies_topic = gate_settings.requests_topic, gate_settings.replies_topic
    ids = list(answers)  # answer ids; request i has correlation id c<i>
    correlation = {f"c{i}": answer_id for i, answer_id in enumerate(ids)}

    def send(numbers: range, codec: str) -> None:
        for i in numbers:
            headers = {
                REPLY_TOPIC_HEADER: replies_topic,
                AUTHORIZATION_HEADER: f"Bearer {TOKEN}",
                CORRELATION_ID_HEADER: f"c{i}",
                BUDGET_HEADER: "3000",
                "traceparent": TRACEPARENT,
            }
            _request(kcat, kafka_bootstrap, requests_topic, answers[ids[i]], codec=codec,
                     partition=i % PARTITIONS, headers=headers)  # fmt: skip

    auth = {AUTHORIZATION_HEADER: f"Bearer {TOKEN}"}
    route = {REPLY_TOPIC_HEADER: replies_topic}
    hostile = {  # body, headers; only the last two have a usable reply route
        "x1": (answers[ids[0]], {**auth, CORRELATION_ID_HEADER: "x1"}),
        "x2": (answers[ids[1]], {**auth, REPLY_TOPIC_HEADER: "__consumer_offsets",
                                 CORRELATION_ID_HEADER: "x2"}),
        "x3": (answers[ids[2]], {**auth, REPLY_TOPIC_HEADER: "no-such-topic",
                                 CORRELATION_ID_HEADER: "x3"}),
        "x4": (b'{"schema_version": 1, "answ', {**auth, **route, CORRELATION_ID_HEADER: "x4"}),
        "x5": (answers[ids[3]], {**auth, **route, CORRELATION_ID_HEADER: "x5",
                                 BUDGET_HEADER: "-3"}),
    }  # fmt: skip
    http_answer = example_answers("gh", range(1))

    def replies() -> Counter[str]:
        return Counter(k.decode() for k, _ in read_committed(kcat, kafka_bootstrap, replies_topic))

    def verdicts() -> list[Verdict]:
        records = read_committed(kcat, kafka_bootstrap, topics.verdicts)
        return [Verdict.model_validate_json(value) for _, value in records]

    gate = WorkerProcess(settings, tmp_path / "gate-1.log", command=("gate", "serve")).start()
    try:
        await _ready(url, gate)
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{url}/v1/check",
                data=next(iter(http_answer.values())),
                headers={**auth, "Content-Type": "application/json", "traceparent": TRACEPARENT},
            ) as reply,
        ):
            assert reply.status == 200, await reply.text()
        await asyncio.to_thread(send, range(0, BATCH), "zstd")
        for body, headers in hostile.values():
            await asyncio.to_thread(_request, kcat, kafka_bootstrap, requests_topic, body,
                                    headers=headers)  # fmt: skip

        def first_batch_done() -> bool:
            answered = {v.answer_id for v in verdicts()}
            return set(http_answer) | set(ids[:BATCH]) <= answered

        # the HTTP verdict leaves through the outbox, which a kill -9 would lose: wait for it
        await _until("the first batch's verdicts", first_batch_done, gate)
        await asyncio.to_thread(send, range(BATCH, 2 * BATCH), "lz4")
    finally:
        gate.kill()
    at_kill = replies()
    await asyncio.to_thread(send, range(2 * BATCH, 3 * BATCH), "snappy")  # while it is down

    restarted = WorkerProcess(settings, tmp_path / "gate-2.log", command=("gate", "serve"))
    restarted.start()
    try:
        await _ready(url, restarted)
        expected = set(correlation) | {"x4", "x5"}
        await _until("a reply to every request", lambda: set(replies()) >= expected, restarted)
        # The killed gate's open transaction hides what follows it on a verdicts partition
        # from read_committed readers until the broker aborts it (transaction_timeout_s).
        await _until(
            "a verdict for every answer",
            lambda: {v.answer_id for v in verdicts()} >= set(ids) | set(http_answer),
            restarted,
        )
        await asyncio.sleep(3.0)  # a reply or verdict published twice would show by now
    finally:
        code = restarted.stop()
    assert code == 0, f"the restarted gate exited {code}:\n{restarted.log_tail(60)}"

    records = await asyncio.to_thread(read_committed, kcat, kafka_bootstrap, replies_topic)
    counts = Counter(key.decode() for key, _ in records)
    if kafka_reply == "immediate":
        assert set(counts) == expected, f"at the kill: {sorted(at_kill)}"
    else:
        assert counts == Counter(expected), f"at the kill: {sorted(at_kill)}"
    bodies = {key.decode(): json.loads(value) for key, value in records}
    for key, answer_id in correlation.items():
        assert GateReply.model_validate(bodies[key]).verdict.answer_id == answer_id
    assert GateError.model_validate(bodies["x4"]).error == "bad_json"
    assert GateError.model_validate(bodies["x5"]).error == "bad_budget"

    final = await asyncio.to_thread(verdicts)
    by_answer = Counter(v.answer_id for v in final)
    assert by_answer == Counter(set(ids) | set(http_answer))
    assert all(v.trace_id == TRACE_ID for v in final)

    letters = [
        DeadLetter.model_validate_json(value)
        for _, value in await asyncio.to_thread(
            read_committed, kcat, kafka_bootstrap, topics.dead_letter
        )
    ]
    sent = sorted(body for body, _ in hostile.values())
    assert sorted(base64.b64decode(letter.value_b64) for letter in letters) == sent
