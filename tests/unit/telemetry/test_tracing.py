"""Spans of one micro-batch, exported in memory: each answer's span continues its
producer's trace, the batch span links to every message, the records written for an
answer carry its context."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from streamproc.telemetry import semconv
from streamproc.telemetry.trace_headers import KafkaHeadersSetter, extract, inject
from streamproc.telemetry.tracing import MessageRef, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import trace_id_from_traceparent
from tests.unit.telemetry.conftest import (
    BAD,
    GOOD,
    GROUP,
    PARENT_SPAN,
    PARENT_TRACE,
    TOPIC,
    TRACEPARENT,
    Otel,
    judged,
    make_otel,
)


def ref(offset: int, *headers: tuple[str, bytes | None], partition: int = 0) -> MessageRef:
    return MessageRef(TOPIC, partition, offset, b"conv", headers)


def by_name(otel: Otel, name: str) -> list[ReadableSpan]:
    return [span for span in otel.spans.get_finished_spans() if span.name == name]


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return trace.format_trace_id(span.context.trace_id)


def test_answer_span_is_the_child_of_the_traceparent_in_its_header(otel: Otel) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(7, ("traceparent", TRACEPARENT))]) as batch:
        message = batch.messages[0]
        assert message.trace_id == PARENT_TRACE

    (span,) = by_name(otel, semconv.ANSWER_SPAN)
    assert hex_trace(span) == PARENT_TRACE
    assert span.parent is not None
    assert trace.format_span_id(span.parent.span_id) == PARENT_SPAN
    assert span.parent.is_remote
    assert span.kind is SpanKind.CONSUMER
    assert span.attributes is not None
    assert span.attributes[semconv.MESSAGING_SYSTEM] == "kafka"
    assert span.attributes[semconv.MESSAGING_DESTINATION_NAME] == TOPIC
    assert span.attributes[semconv.MESSAGING_CONSUMER_GROUP_NAME] == GROUP
    assert span.attributes[semconv.MESSAGING_DESTINATION_PARTITION_ID] == "0"
    assert span.attributes[semconv.MESSAGING_KAFKA_OFFSET] == 7
    assert span.attributes[semconv.MESSAGING_KAFKA_MESSAGE_KEY] == "conv"


def test_output_headers_carry_the_answer_spans_context(otel: Otel) -> None:
    tracestate = b"vendor=abc"
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch(
        [ref(0, ("traceparent", TRACEPARENT), ("tracestate", tracestate))]
    ) as batch:
        headers = dict(batch.messages[0].headers)

    (span,) = by_name(otel, semconv.ANSWER_SPAN)
    assert span.context is not None
    assert trace_id_from_traceparent(headers["traceparent"]) == PARENT_TRACE
    # The downstream parent is the answer span itself, not the producer's span.
    assert headers["traceparent"].decode().split("-")[2] == trace.format_span_id(
        span.context.span_id
    )
    assert headers["tracestate"] == tracestate


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("traceparent", b"garbage"),),
        (("traceparent", None),),
        (("traceparent", f"00-{'0' * 32}-{PARENT_SPAN}-01".encode()),),
        (("traceparent", f"00-{PARENT_TRACE}-{'0' * 16}-01".encode()),),
        (("traceparent", b"\xff\xfe-not-latin"),),
    ],
    ids=["absent", "garbage", "none-value", "zero-trace", "zero-span", "binary"],
)
def test_absent_or_malformed_traceparent_starts_a_new_root(
    otel: Otel, headers: tuple[tuple[str, bytes | None], ...]
) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    # A span current in the caller must not become the parent either.
    with (
        otel.telemetry.tracer.start_as_current_span("ambient"),
        tracing.start_batch([ref(0, *headers)]) as batch,
    ):
        trace_id = batch.messages[0].trace_id
        out = dict(batch.messages[0].headers)

    (span,) = by_name(otel, semconv.ANSWER_SPAN)
    (ambient,) = by_name(otel, "ambient")
    assert span.parent is None
    assert hex_trace(span) == trace_id
    assert trace_id not in (PARENT_TRACE, hex_trace(ambient))
    assert trace_id_from_traceparent(out["traceparent"]) == trace_id


def test_header_names_compare_case_insensitively(otel: Otel) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0, ("Traceparent", TRACEPARENT))]) as batch:
        assert batch.messages[0].trace_id == PARENT_TRACE


def test_batch_span_links_to_every_message_with_messaging_attributes(otel: Otel) -> None:
    other_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    other = f"00-{other_trace}-00f067aa0ba902b7-01".encode()
    messages = [
        ref(10, ("traceparent", TRACEPARENT)),
        ref(11, ("traceparent", other)),
        ref(12),  # no context to link to
    ]
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch(messages):
        pass

    (batch_span,) = by_name(otel, f"process {TOPIC}")
    assert batch_span.kind is SpanKind.CONSUMER
    assert batch_span.parent is None
    assert batch_span.attributes is not None
    assert dict(batch_span.attributes) == {
        semconv.MESSAGING_SYSTEM: "kafka",
        semconv.MESSAGING_OPERATION_TYPE: "process",
        semconv.MESSAGING_OPERATION_NAME: "process",
        semconv.MESSAGING_CONSUMER_GROUP_NAME: GROUP,
        semconv.MESSAGING_BATCH_MESSAGE_COUNT: 3,
        semconv.MESSAGING_DESTINATION_NAME: TOPIC,
        semconv.MESSAGING_DESTINATION_PARTITION_ID: "0",
    }
    links = {
        (
            trace.format_trace_id(link.context.trace_id),
            trace.format_span_id(link.context.span_id),
        ): dict(link.attributes or {})
        for link in batch_span.links
    }
    assert links == {
        (PARENT_TRACE, PARENT_SPAN): {
            semconv.MESSAGING_DESTINATION_NAME: TOPIC,
            semconv.MESSAGING_DESTINATION_PARTITION_ID: "0",
            semconv.MESSAGING_KAFKA_OFFSET: 10,
        },
        (other_trace, "00f067aa0ba902b7"): {
            semconv.MESSAGING_DESTINATION_NAME: TOPIC,
            semconv.MESSAGING_DESTINATION_PARTITION_ID: "0",
            semconv.MESSAGING_KAFKA_OFFSET: 11,
        },
    }
    # And every answer span links back to the batch span.
    assert batch_span.context is not None
    for span in by_name(otel, semconv.ANSWER_SPAN):
        assert [link.context.span_id for link in span.links] == [batch_span.context.span_id]


def test_batch_over_several_partitions_names_no_single_partition(otel: Otel) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0, partition=0), ref(0, partition=1)]):
        pass
    (batch_span,) = by_name(otel, f"process {TOPIC}")
    assert batch_span.attributes is not None
    assert semconv.MESSAGING_DESTINATION_PARTITION_ID not in batch_span.attributes
    assert batch_span.attributes[semconv.MESSAGING_BATCH_MESSAGE_COUNT] == 2


def test_verdict_and_dead_letter_facts_land_on_their_message_spans(otel: Otel) -> None:
    output = judged(GOOD, BAD, {"not": "an answer"})
    assert [v.answer_id for v in output.verdicts] == ["ans-e1", "ans-e2"]
    (letter,) = output.dead_letters
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0), ref(1), ref(2)]) as batch:
        for offset, verdict in enumerate(output.verdicts):
            batch.verdict(MessageOrigin(TOPIC, 0, offset, b"conv"), verdict)
        batch.dead_letter(letter, letter.reason.value)  # a DeadLetter names its record

    spans = {
        (span.attributes or {})[semconv.MESSAGING_KAFKA_OFFSET]: span
        for span in by_name(otel, semconv.ANSWER_SPAN)
    }
    bad = spans[1].attributes
    assert bad is not None
    assert bad[semconv.STREAMPROC_ANSWER_ID] == "ans-e2"
    assert bad[semconv.STREAMPROC_ACTION] == "withhold"
    assert bad[semconv.STREAMPROC_HALLUCINATED] is True
    assert bad[semconv.STREAMPROC_CLAIMS_CONTRADICTED] == 1
    assert bad[semconv.STREAMPROC_ASSISTANT_ID] == "bot"
    assert bad[semconv.STREAMPROC_TENANT] == "acme"
    assert bad[semconv.STREAMPROC_MODEL] == "llm-1"
    good = spans[0].attributes
    assert good is not None
    assert good[semconv.STREAMPROC_ACTION] == "pass"
    assert good[semconv.STREAMPROC_FAITHFULNESS] == 1.0
    assert spans[0].status.status_code is StatusCode.UNSET
    assert spans[2].status.status_code is StatusCode.ERROR
    assert spans[2].status.description == letter.reason.value
    assert (spans[2].attributes or {})[semconv.ERROR_TYPE] == letter.reason.value


def test_a_record_of_another_batch_is_refused(otel: Otel) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0)]) as batch, pytest.raises(KeyError):
        batch.message(MessageOrigin(TOPIC, 0, 99, None))


def test_stage_spans_are_built_from_measured_times(otel: Otel) -> None:
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0, ("traceparent", TRACEPARENT)), ref(1)]) as batch:
        batch.clock.record("judge", 1_000_000_000, 1_250_000_000)
        with batch.clock.stage("publish"):
            pass

    judge_spans = by_name(otel, "groundedness.judge")
    assert len(judge_spans) == 3  # under the batch span and under each answer span
    assert {(s.start_time, s.end_time) for s in judge_spans} == {(1_000_000_000, 1_250_000_000)}
    parents = {s.parent.span_id for s in judge_spans if s.parent is not None}
    expected = {
        s.context.span_id
        for s in by_name(otel, semconv.ANSWER_SPAN) + by_name(otel, f"process {TOPIC}")
        if s.context is not None
    }
    assert parents == expected
    publish = by_name(otel, "groundedness.publish")
    assert len(publish) == 3
    assert all(s.end_time is not None and s.start_time is not None for s in publish)


def test_stage_spans_off_keeps_only_the_batch_ones() -> None:
    otel = make_otel(stage_spans=False)
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(0), ref(1)]) as batch:
        batch.clock.record("judge", 10, 20)
    (judge_span,) = by_name(otel, "groundedness.judge")
    (batch_span,) = by_name(otel, f"process {TOPIC}")
    assert judge_span.parent is not None and batch_span.context is not None
    assert judge_span.parent.span_id == batch_span.context.span_id


def test_a_failed_batch_marks_its_spans_and_emits_no_evaluation(otel: Otel) -> None:
    (verdict,) = judged(BAD).verdicts
    tracing = Tracing(otel.telemetry, group=GROUP)
    with pytest.raises(RuntimeError), tracing.start_batch([ref(0)]) as batch:
        batch.verdict(MessageOrigin(TOPIC, 0, 0, None), verdict)
        raise RuntimeError("broker gone")
    spans = otel.spans.get_finished_spans()
    assert len(spans) == 2
    assert all(span.status.status_code is StatusCode.ERROR for span in spans)
    assert all((span.attributes or {})[semconv.ERROR_TYPE] == "RuntimeError" for span in spans)
    assert otel.logs.get_finished_logs() == ()


def test_parent_based_sampling_follows_the_producer() -> None:
    otel = make_otel(sample_ratio=0.0)
    unsampled = f"00-{PARENT_TRACE}-{PARENT_SPAN}-00".encode()
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch(
        [ref(0, ("traceparent", TRACEPARENT)), ref(1, ("traceparent", unsampled)), ref(2)]
    ) as batch:
        out = [dict(m.headers)["traceparent"] for m in batch.messages]
    # Only the answer whose producer sampled its trace is recorded; the new roots (the
    # batch span, the answer without a context) fall to the 0 ratio.
    (span,) = otel.spans.get_finished_spans()
    assert span.name == semconv.ANSWER_SPAN
    assert span.attributes is not None and span.attributes[semconv.MESSAGING_KAFKA_OFFSET] == 0
    # Unsampled answers still propagate a valid context, flagged not sampled.
    assert sampled(out[0])
    assert out[1].startswith(f"00-{PARENT_TRACE}-".encode()) and not sampled(out[1])
    assert trace_id_from_traceparent(out[2]) is not None and not sampled(out[2])


def sampled(traceparent: bytes) -> bool:
    """The W3C ``sampled`` bit (the SDK may also set the ``random`` bit, 0x02)."""
    return bool(int(traceparent.split(b"-")[3], 16) & 0x01)


def test_extract_inject_round_trip_and_setter_replaces() -> None:
    context = extract([("traceparent", TRACEPARENT), ("baggage", b"tenant=acme")])
    headers = dict(inject(context))
    assert headers["traceparent"] == TRACEPARENT
    assert headers["baggage"] == b"tenant=acme"
    assert inject(extract(None)) == ()

    carrier: list[tuple[str, bytes]] = [("traceparent", b"old"), ("other", b"x")]
    KafkaHeadersSetter().set(carrier, "traceparent", "new")
    assert carrier == [("other", b"x"), ("traceparent", b"new")]


def test_message_ref_from_an_aiokafka_record() -> None:
    from aiokafka import ConsumerRecord

    record: ConsumerRecord[bytes, bytes] = ConsumerRecord(
        topic=TOPIC,
        partition=3,
        offset=42,
        timestamp=0,
        timestamp_type=0,
        key=b"k",
        value=b"{}",
        checksum=None,
        serialized_key_size=1,
        serialized_value_size=2,
        headers=[("traceparent", TRACEPARENT)],
    )
    assert MessageRef.from_record(record) == MessageRef(
        TOPIC, 3, 42, b"k", [("traceparent", TRACEPARENT)]
    )


def test_log_fields_name_the_answer(otel: Otel) -> None:
    (verdict,) = judged(GOOD).verdicts
    tracing = Tracing(otel.telemetry, group=GROUP)
    with tracing.start_batch([ref(5, ("traceparent", TRACEPARENT))]) as batch:
        traced = batch.verdict(MessageOrigin(TOPIC, 0, 5, None), verdict)
        fields = traced.log_fields()
    (span,) = by_name(otel, semconv.ANSWER_SPAN)
    assert span.context is not None
    assert fields == {
        "partition": 0,
        "offset": 5,
        "trace_id": PARENT_TRACE,
        "span_id": trace.format_span_id(span.context.span_id),
        "answer_id": "ans-e1",
    }
