"""``gen_ai.evaluation.result`` log records: one per answer and per checked claim,
correlated with the answer's span, with reason codes but never the texts."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.trace import SpanContext, TraceFlags

from streamproc.contracts.reasons import Reason
from streamproc.telemetry import semconv
from streamproc.telemetry.evaluation_log import evaluation_records, reason_codes
from streamproc.telemetry.tracing import MessageRef, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin
from tests.unit.telemetry.conftest import (
    BAD,
    EVIDENCE,
    GOOD,
    GROUP,
    PARENT_TRACE,
    TOPIC,
    TRACEPARENT,
    Otel,
    judged,
    verdict_of,
)


def attributes(record: ReadableLogRecord) -> dict[str, object]:
    return dict(record.log_record.attributes or {})


def test_records_carry_the_answer_spans_ids_and_the_gen_ai_attributes(otel: Otel) -> None:
    output = judged(GOOD, BAD)
    tracing = Tracing(otel.telemetry, group=GROUP)
    messages = [MessageRef(TOPIC, 0, i, None, [("traceparent", TRACEPARENT)]) for i in (0, 1)]
    with tracing.start_batch(messages) as batch:
        for offset, verdict in enumerate(output.verdicts):
            batch.verdict(MessageOrigin(TOPIC, 0, offset, None), verdict)
        assert otel.logs.get_finished_logs() == ()  # only once the batch is published

    span_ids = {
        str((span.attributes or {})[semconv.STREAMPROC_ANSWER_ID]): span.context.span_id
        for span in otel.spans.get_finished_spans()
        if span.name == semconv.ANSWER_SPAN and span.context is not None
    }
    records = otel.logs.get_finished_logs()
    # GOOD and BAD have one checked claim each: an answer record and a claim record.
    assert len(records) == 4
    for record in records:
        log = record.log_record
        assert log.event_name == semconv.EVALUATION_RESULT_EVENT
        assert log.trace_id is not None and trace.format_trace_id(log.trace_id) == PARENT_TRACE
        answer_id = str(attributes(record)[semconv.GEN_AI_RESPONSE_ID])
        assert log.span_id == span_ids[answer_id]

    answers = {
        attributes(r)[semconv.GEN_AI_RESPONSE_ID]: attributes(r)
        for r in records
        if attributes(r)[semconv.GEN_AI_EVALUATION_NAME] == semconv.GROUNDEDNESS_EVALUATION
    }
    assert answers["ans-e2"][semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0
    assert answers["ans-e2"][semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "withhold"
    assert (
        answers["ans-e2"][semconv.GEN_AI_EVALUATION_EXPLANATION]
        == "CITATION_NOT_SUPPORTING, NUMBER_MISMATCH"
    )
    assert answers["ans-e2"][semconv.STREAMPROC_HALLUCINATED] is True
    assert answers["ans-e1"][semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert answers["ans-e1"][semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "pass"
    assert semconv.GEN_AI_EVALUATION_EXPLANATION not in answers["ans-e1"]


def test_claim_records_hold_the_verdict_and_codes_but_no_text(otel: Otel) -> None:
    verdict = verdict_of(BAD)
    span_context = SpanContext(
        int(PARENT_TRACE, 16), 0x1234, is_remote=False, trace_flags=TraceFlags(1)
    )
    emitted = evaluation_records(otel.telemetry.logger, verdict, span_context)
    records = otel.logs.get_finished_logs()
    assert emitted == len(records) == 2
    claim = next(
        attributes(r)
        for r in records
        if attributes(r)[semconv.GEN_AI_EVALUATION_NAME] == semconv.CLAIM_EVALUATION
    )
    assert claim[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "contradicted"
    assert claim[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0
    assert claim[semconv.STREAMPROC_CLAIM_INDEX] == 0
    assert (
        claim[semconv.GEN_AI_EVALUATION_EXPLANATION] == "CITATION_NOT_SUPPORTING, NUMBER_MISMATCH"
    )
    assert all(r.log_record.span_id == 0x1234 for r in records)
    assert all(r.log_record.severity_number is SeverityNumber.WARN for r in records)
    # The reason detail ("3 not in the evidence"), the claim and the evidence stay out.
    dumped = " ".join(r.to_json() for r in records)
    assert "not in the evidence" not in dumped
    assert "3 May" not in dumped
    assert EVIDENCE not in dumped


def test_answer_level_only_when_claim_records_are_off(otel: Otel) -> None:
    verdict = verdict_of(GOOD)
    tracing = Tracing(otel.telemetry, group=GROUP, claim_records=False)
    with tracing.start_batch([MessageRef(TOPIC, 0, 0)]) as batch:
        batch.verdict(MessageOrigin(TOPIC, 0, 0, None), verdict)
    (record,) = otel.logs.get_finished_logs()
    assert attributes(record)[semconv.GEN_AI_EVALUATION_NAME] == semconv.GROUNDEDNESS_EVALUATION
    assert record.log_record.severity_number is SeverityNumber.INFO
    # A new root trace: the record still joins the answer's span.
    (span,) = [s for s in otel.spans.get_finished_spans() if s.name == semconv.ANSWER_SPAN]
    assert span.context is not None
    assert record.log_record.trace_id == span.context.trace_id
    assert record.log_record.span_id == span.context.span_id


def test_reason_codes_keep_codes_only() -> None:
    read = [Reason.from_text(t) for t in ["B: detail with 'quote'", "A", "B: other", " : x"]]
    assert reason_codes(read) == ["A", "B"]
