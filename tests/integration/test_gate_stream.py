"""The streaming gate as a user runs it: ``streamproc gate serve`` in its own process with
the default judge (the project's NLI verifier) on real Kafka, called over a real
WebSocket with a bearer token.

- A seed answer streamed one character at a time: every sentence released, the final
  equal to /v1/check's reply for the whole answer, and the monitored verdict on the
  verdicts topic once, in the caller's trace.
- The seed and agent sample answers in random pieces: the final equals /v1/check's.
- A refuted sentence is held while the rest is released.
- A budget too small for the model, under each tenant's policy.
- Another tenant's token; bad JSON mid-stream; a client that disappears mid-stream (the
  answer so far monitored once, and the gate keeps serving).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamproc.config import Settings
from streamproc.contracts.gate_events import GateReply
from streamproc.contracts.gate_stream_events import STREAM_CLOSE_CODES, STREAM_PATH
from tests.integration.test_gate_http import (
    OTHER_TOKEN,
    TOKEN,
    TRACE_ID,
    TRACEPARENT,
    _check,
    _read,
    running_gate,
)
from tests.unit.gate.http.stream_client import pieces, same_decision, stream

SAMPLES = Path(__file__).resolve().parents[2] / "streamproc" / "samples"
GENEROUS_MS = 20_000


def _samples(name: str, tenant: str = "open") -> list[dict[str, Any]]:
    events = []
    for line in (SAMPLES / f"{name}.answers.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            fields = json.loads(line)
            fields["occurred_at"] = datetime.now(UTC).isoformat()
            fields["tenant"] = tenant
            events.append(fields)
    return events


def _seed(event_id: str, tenant: str = "open") -> dict[str, Any]:
    [fields] = [f for f in _samples("seed_lab", tenant) if f["event_id"] == event_id]
    return {**fields, "event_id": f"{event_id}-{tenant}", "answer_id": f"{event_id}-{tenant}"}


@pytest.fixture(scope="module")
def gate(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Settings]]:
    directory = tmp_path_factory.mktemp("gate-stream")
    with running_gate(kafka_bootstrap, directory, "gate-stream", kafka_requests=False) as served:
        yield served


async def _verdicts_of(settings: Settings, answer_id: str) -> list[Any]:
    def mine(seen: list[Any]) -> list[Any]:
        return [r for r in seen if json.loads(r.value)["answer_id"] == answer_id]

    seen = await _read(settings, settings.topics.verdicts, lambda s: len(mine(s)) >= 1)
    return mine(seen)


async def test_a_seed_answer_one_character_at_a_time(gate: tuple[str, Settings]) -> None:
    url, settings = gate
    fields = _seed("seed-c01")
    answer = fields["answer"]
    got = await stream(
        url,
        {**fields, "answer": ""},
        pieces(answer, 1),
        token=TOKEN,
        budget_ms=GENEROUS_MS,
        headers={"traceparent": TRACEPARENT},
    )
    assert got.error is None and got.close_code == 1000, got
    assert got.final is not None and got.final.verified
    assert all(s.decision == "release" and s.verified for s in got.sentences), got.sentences
    assert "".join(s.text for s in got.sentences).replace(" ", "") == answer.replace(" ", "")
    status, text = await _check(
        url, json.dumps(fields).encode(), **{"X-Budget-Ms": str(GENEROUS_MS)}
    )
    assert status == 200, text
    reply = GateReply.model_validate_json(text)
    same_decision(
        got.final,
        reply.model_copy(
            update={"verdict": reply.verdict.model_copy(update={"trace_id": TRACE_ID})}
        ),
    )
    verdicts = await _verdicts_of(settings, fields["answer_id"])
    assert len(verdicts) == 2  # the stream's and the /v1/check's: each answer once
    traced = [dict(r.headers) for r in verdicts if "traceparent" in dict(r.headers)]
    [streamed] = traced  # the stream's verdict, in the caller's trace
    assert streamed["traceparent"].decode().split("-")[1] == TRACE_ID


async def test_sample_answers_in_pieces_end_as_check_decides_them(
    gate: tuple[str, Settings],
) -> None:
    url, _ = gate
    rng = random.Random(3)
    for fields in _samples("seed_lab") + _samples("agent_cases"):
        answer = fields["answer"]
        cuts = sorted(rng.sample(range(1, len(answer)), k=min(len(answer) - 1, 10)))
        deltas = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
        got = await stream(
            url, {**fields, "answer": deltas[0]}, deltas[1:], token=TOKEN, budget_ms=GENEROUS_MS
        )
        status, text = await _check(
            url, json.dumps(fields).encode(), **{"X-Budget-Ms": str(GENEROUS_MS)}
        )
        assert status == 200, text
        assert got.final is not None, (fields["event_id"], got)
        same_decision(got.final, GateReply.model_validate_json(text))


async def test_a_refuted_sentence_is_held_and_the_rest_released(
    gate: tuple[str, Settings],
) -> None:
    url, _ = gate
    fields = _seed("seed-c05")  # its second sentence is not in the evidence
    got = await stream(
        url,
        {**fields, "answer": ""},
        pieces(fields["answer"], 5),
        token=TOKEN,
        budget_ms=GENEROUS_MS,
    )
    assert got.final is not None
    decisions = [(s.index, s.decision) for s in got.sentences]
    assert decisions == [(0, "release"), (1, "hold")], got.sentences
    assert got.final.decision.value == "trim"
    assert got.final.answer_text == got.sentences[0].text and got.final.withdrawn == []


@pytest.mark.parametrize(("tenant", "shown"), [("open", "release"), ("closed", "hold")])
async def test_a_budget_too_small_follows_the_tenants_policy(
    gate: tuple[str, Settings], tenant: str, shown: str
) -> None:
    url, _ = gate
    fields = _seed("seed-c03", tenant)
    got = await stream(
        url, {**fields, "answer": ""}, pieces(fields["answer"], 8), token=TOKEN, budget_ms=1
    )
    assert got.final is not None and not got.final.verified
    assert got.final.reason is not None and got.final.reason.value == "BUDGET_EXCEEDED"
    unverified = [s for s in got.sentences if not s.verified]
    assert unverified and all(s.decision == shown for s in unverified), got.sentences
    assert got.final.policy == ("fail-open" if tenant == "open" else "fail-closed")


async def test_another_tenants_token_is_refused(gate: tuple[str, Settings]) -> None:
    url, _ = gate
    fields = _seed("seed-c01")
    got = await stream(
        url, {**fields, "answer": ""}, pieces(fields["answer"], 20), token=OTHER_TOKEN
    )
    assert got.order == ["error"] and got.error is not None and got.error.error == "forbidden"
    assert got.close_code == STREAM_CLOSE_CODES["forbidden"]


async def test_bad_json_mid_stream_is_refused_and_monitored_once(
    gate: tuple[str, Settings],
) -> None:
    url, settings = gate
    fields = {**_seed("seed-c01"), "event_id": "bad-json", "answer_id": "bad-json"}
    half = fields["answer"][: len(fields["answer"]) // 2]
    got = await stream(
        url,
        {**fields, "answer": ""},
        [*pieces(half, 10), b"{not json"],
        token=TOKEN,
        budget_ms=GENEROUS_MS,
    )
    assert got.error is not None and got.error.error == "bad_json"
    assert got.close_code == STREAM_CLOSE_CODES["bad_json"]
    [verdict] = await _verdicts_of(settings, fields["answer_id"])
    judged = json.loads(verdict.value)["judgement"]
    assert judged["claims"], judged


async def test_a_client_that_disappears_is_monitored_once_and_the_gate_serves_on(
    gate: tuple[str, Settings],
) -> None:
    url, settings = gate
    fields = {**_seed("seed-c05"), "event_id": "gone", "answer_id": "gone"}
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(url + STREAM_PATH, headers={"Authorization": f"Bearer {TOKEN}"})
        await ws.send_str(json.dumps({"type": "start", "event": {**fields, "answer": ""}}))
        await ws.send_str(json.dumps({"type": "delta", "text": fields["answer"][:80]}))
    # the session is gone without a close handshake
    [verdict] = await _verdicts_of(settings, fields["answer_id"])
    assert json.loads(verdict.value)["answer_id"] == fields["answer_id"]
    again = _seed("seed-c01")
    again = {**again, "event_id": "after-gone", "answer_id": "after-gone"}
    got = await stream(url, {**again, "answer": ""}, pieces(again["answer"], 30), token=TOKEN)
    assert got.final is not None and got.close_code == 1000
