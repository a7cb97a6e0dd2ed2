"""One answer followed from its producer's trace through the judging loop, on real Kafka.

The loop runs in this process with the SDK's in-memory exporters: each answer's span is
the child of the ``traceparent`` it was sent with (a new root without one), the batch
span links to each message, every record written for an answer carries that answer's
``traceparent``, and each verdict has one ``gen_ai.evaluation.result`` log record in the
same trace. The audit record names the same trace.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from opentelemetry import trace
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamproc.config import Settings
from streamproc.monitor.judging_loop import JudgeLoop
from streamproc.telemetry import semconv
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_judge, kafka_loop_options, prepare_topics, stage_limits

TRACE_A, SPAN_A = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACE_B, SPAN_B = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"trace-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"trace-{run}.{name}" for name in names}, "partitions": 1},
        audit={"topic": f"trace-{run}.audit"},
        judge={"name": "rules"},
        worker={"batch_max": 50, "event_time_max_past_s": 10 * 365 * 24 * 3600.0},
    )


def _answer(event_id: str, supported: bool) -> bytes:
    text = "The store opens at 9 am." if supported else "The store opens at 7 am."
    return json.dumps(
        {
            "event_id": event_id,
            "answer_id": f"ans-{event_id}",
            "conversation_id": "c1",
            "tenant": "t1",
            "assistant_id": "bot",
            "model": "m1",
            "occurred_at": datetime.now(UTC).isoformat(),
            "question": "When does the store open?",
            "answer": text,
            "evidence": [{"id": "D1", "text": "The store opens at 9 am on weekdays."}],
        }
    ).encode()


def _traceparent(trace_id: str, span_id: str) -> list[tuple[str, bytes]]:
    return [("traceparent", f"00-{trace_id}-{span_id}-01".encode())]


async def _read(
    settings: Settings, topics: list[str], done: Callable[[dict[str, list[object]]], bool]
) -> dict[str, list[object]]:
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=settings.bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    seen: dict[str, list[object]] = {topic: [] for topic in topics}
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not done(seen):
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                seen[tp.topic] += records
    finally:
        await consumer.stop()
    return seen


async def test_an_answer_is_traced_from_its_producer_through_every_output(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        topic = settings.topics.answers
        await producer.send_and_wait(
            topic, _answer("e1", True), headers=_traceparent(TRACE_A, SPAN_A)
        )
        await producer.send_and_wait(
            topic, _answer("e2", False), headers=_traceparent(TRACE_B, SPAN_B)
        )
        await producer.send_and_wait(topic, _answer("e3", True))  # no trace: a new root
        await producer.send_and_wait(
            topic, b"{not json", headers=[("traceparent", f"00-{TRACE_A}-{SPAN_A}-01".encode())]
        )
    finally:
        await producer.stop()

    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    telemetry = Telemetry.from_settings(
        TelemetrySettings(), span_exporter=spans, log_exporter=logs, synchronous=True
    )
    loop = JudgeLoop(
        kafka_loop_options(settings),
        build_judge(settings.judge),
        telemetry=telemetry,
        limits=stage_limits(settings),
    )
    task = asyncio.create_task(loop.run())
    outputs = [settings.topics.verdicts, settings.topics.dead_letter, settings.audit.topic]
    try:
        seen = await _read(
            settings,
            outputs,
            lambda s: (
                len(s[outputs[0]]) >= 3 and len(s[outputs[1]]) >= 1 and len(s[outputs[2]]) >= 3
            ),
        )
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)
        telemetry.shutdown()

    answer_spans = {
        dict(span.attributes or {})[semconv.STREAMPROC_ANSWER_ID]: span
        for span in spans.get_finished_spans()
        if span.name == semconv.ANSWER_SPAN
        and semconv.STREAMPROC_ANSWER_ID in (span.attributes or {})
    }
    assert set(answer_spans) == {"ans-e1", "ans-e2", "ans-e3"}
    for answer_id, (trace_id, parent_span) in {
        "ans-e1": (TRACE_A, SPAN_A),
        "ans-e2": (TRACE_B, SPAN_B),
    }.items():
        span = answer_spans[answer_id]
        assert trace.format_trace_id(span.context.trace_id) == trace_id
        assert span.parent is not None and trace.format_span_id(span.parent.span_id) == parent_span
    assert answer_spans["ans-e3"].parent is None  # a new root
    trace_of = {a: trace.format_trace_id(s.context.trace_id) for a, s in answer_spans.items()}

    for record in seen[outputs[0]]:
        verdict = json.loads(record.value)  # type: ignore[attr-defined]
        header = dict(record.headers)["traceparent"].decode()  # type: ignore[attr-defined]
        assert header.split("-")[1] == trace_of[verdict["answer_id"]] == verdict["trace_id"]
        span_id = trace.format_span_id(answer_spans[verdict["answer_id"]].context.span_id)
        assert header.split("-")[2] == span_id  # downstream continues the answer's span
    (letter,) = seen[outputs[1]]
    assert dict(letter.headers)["traceparent"].decode().split("-")[1] == TRACE_A  # type: ignore[attr-defined]
    audits = {
        json.loads(r.value)["answer_id"]: json.loads(r.value)  # type: ignore[attr-defined]
        for r in seen[outputs[2]]
    }
    assert {a: audits[a]["trace_id"] for a in trace_of} == trace_of

    (batch,) = [s for s in spans.get_finished_spans() if s.name.startswith("process ")]
    linked = {trace.format_trace_id(link.context.trace_id) for link in batch.links}
    assert linked == {TRACE_A, TRACE_B}  # the messages that came with a creation context
    assert dict(batch.attributes or {})[semconv.MESSAGING_BATCH_MESSAGE_COUNT] == 4
    stages = {
        s.name
        for s in spans.get_finished_spans()
        if s.parent is not None and s.parent.span_id == batch.context.span_id
    }
    # The loop's stages and the judge's own (the rules judge: claims, check, decide).
    assert {"groundedness.judge", "groundedness.publish", "groundedness.judge.check"} <= stages

    evaluations = [
        log.log_record
        for log in logs.get_finished_logs()
        if log.log_record.event_name == semconv.EVALUATION_RESULT_EVENT
        and dict(log.log_record.attributes or {}).get(semconv.GEN_AI_RESPONSE_ID) is not None
    ]
    by_answer = {
        dict(r.attributes or {})[semconv.GEN_AI_RESPONSE_ID]: trace.format_trace_id(r.trace_id or 0)
        for r in evaluations
    }
    assert by_answer == trace_of
