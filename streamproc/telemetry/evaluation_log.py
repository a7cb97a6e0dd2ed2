"""``gen_ai.evaluation.result`` log records: the judgement as the GenAI conventions say.

One record per judged answer (``gen_ai.evaluation.name`` = ``groundedness``; score: the
faithfulness; label: the action, pass / trim / withhold) and one per checked claim
(``groundedness.claim``; score: its support score; label: its verdict), emitted through
the OpenTelemetry Logs API (span events are being deprecated for this) with the answer
span's trace and span ids, and ``gen_ai.response.id`` = the answer id. The explanation
is the reason *codes* only: a reason's detail may quote the answer or the evidence.

The conventions are at Development status (semantic-conventions-genai): every name comes
from :mod:`streamproc.telemetry.semconv`.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import _logs, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext
from opentelemetry.util.types import AttributeValue

from streamproc.contracts.events import Action, ClaimVerdict, Verdict, VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.telemetry import semconv

__all__ = ["evaluation_records", "reason_codes"]


def reason_codes(reasons: Sequence[Reason]) -> list[str]:
    """The codes of ``reasons`` (details may quote the answer or evidence, so only codes
    leave the worker), sorted and unique."""
    return sorted({reason.code for reason in reasons} - {""})


def evaluation_records(
    logger: _logs.Logger,
    verdict: Verdict,
    span_context: SpanContext,
    *,
    claims: bool = True,
    timestamp_ns: int | None = None,
) -> int:
    """Emit ``gen_ai.evaluation.result`` for the answer (score: faithfulness, label: the
    action) and, with ``claims``, for each checked claim (score: its support score,
    label: its verdict), all carrying ``span_context``'s trace and span ids. Returns how
    many were emitted."""
    context = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    judgement = verdict.judgement
    answer: dict[str, AttributeValue] = {
        semconv.GEN_AI_RESPONSE_ID: verdict.answer_id,
        semconv.GEN_AI_EVALUATION_NAME: semconv.GROUNDEDNESS_EVALUATION,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: judgement.action.value,
        semconv.STREAMPROC_ASSISTANT_ID: verdict.assistant_id,
        semconv.STREAMPROC_TENANT: verdict.tenant,
        semconv.STREAMPROC_MODEL: verdict.model,
        semconv.STREAMPROC_HALLUCINATED: judgement.hallucinated,
    }
    if judgement.faithfulness is not None:
        answer[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = judgement.faithfulness
    codes = reason_codes([reason for claim in judgement.claims for reason in claim.reasons])
    if codes:
        answer[semconv.GEN_AI_EVALUATION_EXPLANATION] = ", ".join(codes)
    severity = SeverityNumber.INFO if judgement.action is Action.PASS else SeverityNumber.WARN
    _emit(logger, context, answer, severity, timestamp_ns)
    emitted = 1
    if claims:
        for claim in judgement.claims:
            if claim.verdict is None:
                continue  # not checked (conversational): nothing was evaluated
            severity = (
                SeverityNumber.INFO
                if claim.verdict is VerdictLabel.SUPPORTED
                else SeverityNumber.WARN
            )
            attributes = _claim_attributes(verdict.answer_id, claim, claim.verdict)
            _emit(logger, context, attributes, severity, timestamp_ns)
            emitted += 1
    return emitted


def _claim_attributes(
    answer_id: str, claim: ClaimVerdict, label: VerdictLabel
) -> dict[str, AttributeValue]:
    """A claim's record: the answer's record beside it (same span) holds who and what."""
    attributes: dict[str, AttributeValue] = {
        semconv.GEN_AI_RESPONSE_ID: answer_id,
        semconv.GEN_AI_EVALUATION_NAME: semconv.CLAIM_EVALUATION,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: label.value,
        semconv.STREAMPROC_CLAIM_INDEX: claim.index,
    }
    if claim.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = claim.score
    codes = reason_codes(claim.reasons)
    if codes:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = ", ".join(codes)
    return attributes


def _emit(
    logger: _logs.Logger,
    context: Context,
    attributes: dict[str, AttributeValue],
    severity: SeverityNumber,
    timestamp_ns: int | None,
) -> None:
    logger.emit(
        timestamp=timestamp_ns,
        context=context,
        severity_number=severity,
        severity_text=severity.name,
        attributes=attributes,
        event_name=semconv.EVALUATION_RESULT_EVENT,
    )
