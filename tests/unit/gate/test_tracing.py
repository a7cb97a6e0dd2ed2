"""One span per decision continuing the caller's trace, its context on the published
records, and the evaluation record, as the worker makes them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from streamproc.gate.span_tracing import GATE_DECISION, GATE_VERIFIED, gate_tracing
from streamproc.gate.tracing import PassThroughTracing
from streamproc.inference.options import JudgeSettings
from streamproc.telemetry import semconv
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_judge, gate_service
from tests.unit.gate.conftest import event, request, settings
from tests.unit.gate.test_service import MIXED
from tests.unit.telemetry.conftest import PARENT_SPAN, PARENT_TRACE, TRACEPARENT, Otel, make_otel


@pytest.fixture()
def otel() -> Iterator[Otel]:
    built = make_otel()
    yield built
    built.telemetry.shutdown()


async def test_the_decision_span_continues_the_callers_trace(otel: Otel) -> None:
    service = gate_service(
        settings(), build_judge(JudgeSettings(name="rules")), tracing=gate_tracing(otel.telemetry)
    )
    await service.start()
    try:
        result = await service.check(
            request(event(MIXED), headers=(("traceparent", TRACEPARENT),), trace_id=PARENT_TRACE)
        )
    finally:
        await service.close()
    [span] = [s for s in otel.spans.get_finished_spans() if s.name == semconv.ANSWER_SPAN]
    assert span.kind is SpanKind.SERVER
    assert trace.format_trace_id(span.context.trace_id) == PARENT_TRACE
    assert span.parent is not None and trace.format_span_id(span.parent.span_id) == PARENT_SPAN
    attributes = span.attributes or {}
    assert attributes[GATE_DECISION] == "trim" and attributes[GATE_VERIFIED] is True
    assert attributes[semconv.STREAMPROC_ANSWER_ID] == "ans-e1"

    own = f"00-{PARENT_TRACE}-{trace.format_span_id(span.context.span_id)}-01".encode()
    assert all(("traceparent", own) in record.headers for record in result.records)
    verdict = json.loads(result.records[0].value or b"")
    assert verdict["trace_id"] == PARENT_TRACE == result.reply.verdict.trace_id

    records = otel.logs.get_finished_logs()
    answers = [
        r
        for r in records
        if (r.log_record.attributes or {}).get(semconv.GEN_AI_EVALUATION_NAME)
        == semconv.GROUNDEDNESS_EVALUATION
    ]
    assert len(answers) == 1
    assert answers[0].log_record.span_id == span.context.span_id


def test_telemetry_off_passes_the_callers_headers_through() -> None:
    assert isinstance(gate_tracing(Telemetry.disabled()), PassThroughTracing)


async def test_a_streamed_answer_has_one_span_per_sentence_under_its_decision(otel: Otel) -> None:
    from streamproc.gate.answer_stream import AnswerStream
    from streamproc.gate.span_tracing import SENTENCE_INDEX, SENTENCE_SPAN

    tracing = gate_tracing(otel.telemetry)
    service = gate_service(settings(), build_judge(JudgeSettings(name="rules")), tracing=tracing)
    await service.start()
    fields = event("")
    start = request(fields, headers=(("traceparent", TRACEPARENT),), trace_id=PARENT_TRACE)
    try:
        answer = AnswerStream(
            service, start, fields, policy="fail-open", max_bytes=1 << 20, tracing=tracing
        )
        answer.add(MIXED[:20])
        answer.add(MIXED[20:])
        checked = await answer.check()
        made = await answer.final()
    finally:
        await service.close()
    assert not isinstance(made, Exception) and isinstance(made, tuple)
    last, final, _ = made
    spans = otel.spans.get_finished_spans()
    [decision] = [s for s in spans if s.name == semconv.ANSWER_SPAN]
    sentences = [s for s in spans if s.name == SENTENCE_SPAN]
    assert len(sentences) == len(checked) + len(last) >= 2
    assert sorted(int(str((s.attributes or {})[SENTENCE_INDEX])) for s in sentences) == list(
        range(len(sentences))
    )
    assert all(
        s.parent is not None and s.parent.span_id == decision.context.span_id for s in sentences
    )
    assert all(s.context.trace_id == decision.context.trace_id for s in sentences)
    assert decision.start_time is not None and all(
        s.start_time is not None and s.start_time >= decision.start_time for s in sentences
    )
    assert final.verdict.trace_id == PARENT_TRACE
