"""The streaming gate (``/v1/stream``) in-process with the rules judge, a real server and a
real WebSocket client: sentences released as they complete, a refuted one held, the final
equal to ``/v1/check`` on every sample answer, each refusal one error and its close code,
the ends the gate makes itself (idle, too long), and the answer monitored once however
the stream ends."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamproc.contracts.events import Action
from streamproc.contracts.gate_events import GateReply
from streamproc.contracts.gate_stream_events import (
    STREAM_CLOSE_CODES,
    STREAM_ENDED_IDLE,
    STREAM_ENDED_TOO_LONG,
    STREAM_PATH,
)
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import output_topics
from tests.unit.gate.conftest import event
from tests.unit.gate.http.http_gate import (
    OTHER_TOKEN,
    TOKEN,
    TRACE_ID,
    TRACEPARENT,
    gate_settings,
    headers,
    post,
    serving,
)
from tests.unit.gate.http.stream_client import GENEROUS_MS, pieces, same_decision, stream

SAMPLES = Path(__file__).resolve().parents[4] / "streamproc" / "samples"
GENEROUS = {"X-Budget-Ms": str(GENEROUS_MS)}
REFUTED = "The supplier delivered 80 of 100 pieces. Incomplete orders cannot be billed."


class KeptSink:
    def __init__(self) -> None:
        self.published: list[OutboundRecord] = []

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        self.published.extend(records)


def _verdicts(sink: KeptSink, settings: Any) -> list[dict[str, Any]]:
    topic = output_topics(settings).verdicts.name
    return [json.loads(r.value or b"null") for r in sink.published if r.topic == topic]


def _samples() -> list[dict[str, Any]]:
    events = []
    for path in sorted(SAMPLES.glob("*.answers.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                fields = json.loads(line)
                fields["occurred_at"] = datetime.now(UTC).isoformat()
                fields["tenant"] = "t"  # the test caller's tenant
                events.append(fields)
    return events


async def test_sentences_are_released_in_order_and_a_refuted_one_is_held(tmp_path: Path) -> None:
    fields = event(REFUTED)
    async with serving(gate_settings(tmp_path)) as gate:
        got = await stream(
            gate.url,
            {**fields, "answer": ""},
            pieces(REFUTED, 1),
            token=TOKEN,
            headers={"traceparent": TRACEPARENT},
        )
        _, text, _ = await post(
            gate, json.dumps(fields).encode(), headers(traceparent=TRACEPARENT, **GENEROUS)
        )
    assert got.error is None and got.close_code == 1000
    assert got.order == ["sentence", "sentence", "final"]
    first, second = got.sentences
    assert (first.index, first.decision, first.verified) == (0, "hold", True)
    assert [c.verdict for c in first.claims] == ["contradicted"]
    assert (second.index, second.decision) == (1, "release")
    assert second.text == "Incomplete orders cannot be billed."
    assert got.final is not None and got.final.decision is Action.TRIM
    assert got.final.answer_text == "Incomplete orders cannot be billed." == got.released
    assert got.final.withdrawn == []
    assert got.final.verdict.trace_id == TRACE_ID
    same_decision(got.final, GateReply.model_validate_json(text))
    assert [path for _, path in gate.sensor.decided_replies] == ["stream", "http"]


async def test_the_final_equals_check_on_every_sample_answer(tmp_path: Path) -> None:
    rng = random.Random(7)
    samples = _samples()
    assert len(samples) >= 20
    async with serving(gate_settings(tmp_path)) as gate:
        for fields in samples:
            answer = fields["answer"]
            cuts = sorted(rng.sample(range(1, len(answer)), k=min(len(answer) - 1, 12)))
            deltas = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
            first_piece = {**fields, "answer": deltas[0]}
            got = await stream(gate.url, first_piece, deltas[1:], token=TOKEN)
            status, text, _ = await post(gate, json.dumps(fields).encode(), headers(**GENEROUS))
            assert status == 200, text
            assert got.error is None and got.final is not None, fields["event_id"]
            same_decision(got.final, GateReply.model_validate_json(text))
            assert [s.index for s in got.sentences] == list(range(len(got.sentences)))
            assert got.order[-1] == "final"


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("token", "fields", "code"),
    [
        (None, event(""), "unauthorized"),
        ("not-a-token", event(""), "unauthorized"),
        (OTHER_TOKEN, event(""), "forbidden"),
        (TOKEN, {"answer": ""}, "schema_violation"),
    ],
)
async def test_a_stream_refused_at_its_start_is_one_error_and_a_close(
    tmp_path: Path, token: str | None, fields: dict[str, Any], code: str
) -> None:
    sink = KeptSink()
    settings = gate_settings(tmp_path, publish=True)
    async with serving(settings, sink=sink) as gate:
        got = await stream(gate.url, fields, pieces(REFUTED, 7), token=token)
    assert got.order == ["error"] and got.error is not None and got.error.error == code
    assert got.close_code == STREAM_CLOSE_CODES[code]
    assert _verdicts(sink, settings) == []  # refused before its start: nothing monitored
    assert [c for c, path in gate.sensor.refusals if path == "stream"] == [code]


async def test_bad_json_mid_stream_is_refused_and_the_answer_so_far_is_monitored_once(
    tmp_path: Path,
) -> None:
    sink = KeptSink()
    settings = gate_settings(tmp_path, publish=True)
    async with serving(settings, sink=sink) as gate:
        got = await stream(
            gate.url,
            event(""),
            ["The supplier delivered 90 of 100 pieces. ", "Incomplete", b"{not json"],
            token=TOKEN,
        )
        [verdict] = await _monitored(sink, settings, 1)
    assert got.error is not None and got.error.error == "bad_json"
    assert got.close_code == STREAM_CLOSE_CODES["bad_json"]
    assert got.final is None
    assert verdict["judgement"]["claims"][0]["text"].startswith("The supplier delivered 90")


async def test_a_delta_past_the_intake_limit_is_refused_oversized(tmp_path: Path) -> None:
    settings = gate_settings(tmp_path, worker={"max_event_bytes": 4096})
    async with serving(settings) as gate:
        got = await stream(gate.url, event(""), ["word " * 1000], token=TOKEN)
    assert got.error is not None and got.error.error == "oversized"
    assert got.close_code == 1009


async def test_a_delta_before_a_start_is_a_protocol_error(tmp_path: Path) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        serving(gate_settings(tmp_path)) as gate,
        aiohttp.ClientSession() as http,
        http.ws_connect(gate.url + STREAM_PATH, headers=auth) as ws,
    ):
        await ws.send_str('{"type": "delta", "text": "Hi."}')
        message = json.loads((await ws.receive()).data)
        await ws.receive()
        code = ws.close_code
    assert message["type"] == "error" and message["error"] == "protocol"
    assert code == 1002


# ------------------------------------------------------------------ ends the gate makes


async def test_an_idle_stream_is_ended_with_its_answer_so_far(tmp_path: Path) -> None:
    sink = KeptSink()
    settings = gate_settings(tmp_path, publish=True, stream_idle_s=0.3)
    async with serving(settings, sink=sink) as gate:
        got = await stream(
            gate.url,
            event(""),
            ["The supplier delivered 90 of 100 pieces."],
            token=TOKEN,
            end=False,
        )
        verdicts = await _monitored(sink, settings, 1)
    assert got.final is not None and got.final.decision is Action.PASS
    assert got.final.answer_text == "The supplier delivered 90 of 100 pieces."
    assert got.close_code == STREAM_ENDED_IDLE
    assert len(verdicts) == 1


async def test_a_stream_open_too_long_is_ended(tmp_path: Path) -> None:
    settings = gate_settings(tmp_path, stream_max_s=0.5, stream_idle_s=5)
    async with (
        serving(settings) as gate,
        aiohttp.ClientSession() as http,
        http.ws_connect(gate.url + STREAM_PATH, headers={"Authorization": f"Bearer {TOKEN}"}) as ws,
    ):
        await ws.send_str(json.dumps({"type": "start", "event": event("Hello")}))
        kinds = []
        for _ in range(20):
            await ws.send_str('{"type": "delta", "text": " there"}')
            await asyncio.sleep(0.05)
        async for message in ws:
            kinds.append(json.loads(message.data)["type"])
        code = ws.close_code
    assert kinds[-1] == "final" and code == STREAM_ENDED_TOO_LONG


async def test_a_client_that_disappears_leaves_no_stream_and_one_verdict(tmp_path: Path) -> None:
    sink = KeptSink()
    settings = gate_settings(tmp_path, publish=True)
    async with serving(settings, sink=sink) as gate:
        for _ in range(5):
            async with aiohttp.ClientSession() as http:
                ws = await http.ws_connect(
                    gate.url + STREAM_PATH, headers={"Authorization": f"Bearer {TOKEN}"}
                )
                await ws.send_str(json.dumps({"type": "start", "event": event("")}))
                await ws.send_str(json.dumps({"type": "delta", "text": REFUTED}))
                await asyncio.sleep(0.05)
            # the session closed under the socket: no close handshake from the client
        verdicts = await _monitored(sink, settings, 5)
        assert gate.server.streams.open_streams == 0
        assert gate.service.pending == 0
        assert gate.sensor.streams_open[-1] == 0 and max(gate.sensor.streams_open) >= 1
    assert len(verdicts) == 5 and len({v["answer_id"] for v in verdicts}) == 1


async def test_streams_past_the_cap_are_refused_busy(tmp_path: Path) -> None:
    async with (
        serving(gate_settings(tmp_path, max_streams=1)) as gate,
        aiohttp.ClientSession() as http,
    ):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with http.ws_connect(gate.url + STREAM_PATH, headers=auth) as held:
            await held.send_str(json.dumps({"type": "start", "event": event("")}))
            got = await stream(gate.url, event(""), ["Hi."], token=TOKEN)
            await held.send_str('{"type": "end"}')
    assert got.error is not None and got.error.error == "busy" and got.close_code == 1013


async def _monitored(sink: KeptSink, settings: Any, expected: int) -> list[dict[str, Any]]:
    """The verdicts published once ``expected`` are (or 5 s), and a moment for any more."""
    for _ in range(250):
        if len(_verdicts(sink, settings)) >= expected:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    return _verdicts(sink, settings)
