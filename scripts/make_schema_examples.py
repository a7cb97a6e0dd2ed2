"""Write one example per schema to schemas/examples/, from a real run of the default judge.

The answer event is the one the README and docs/gate.md use (a supplier said to have
delivered 80 of 100 pieces, where the purchase order's record says 90); the verdict,
flag, audit record, outcome, window aggregate, review item and gate reply are what the
default judge makes of it. Deterministic (fixed clock and judge time), so rerunning gives
the same files, and ``tests/unit/test_schema_examples.py`` checks they are current:
    .venv/bin/python scripts/make_schema_examples.py [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from streamproc.config import Settings
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.events import AnswerEvent, Timings
from streamproc.contracts.gate_events import GateReply
from streamproc.contracts.gate_stream_events import (
    StreamDelta,
    StreamEnd,
    StreamError,
    StreamFinal,
    StreamSentence,
    StreamStart,
)
from streamproc.contracts.label_events import (
    AccuracyCell,
    ClaimLabel,
    ClaimLabelValue,
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    LabelAuditEntry,
    LabelDelta,
    LabelEvent,
    RateEstimate,
    ReviewItem,
    Tally,
)
from streamproc.gate.answer_stream import sentence_decision
from streamproc.gate.policy import decide_reply
from streamproc.inference.options import JudgeSettings
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.table import close_due, count_outcome, window_timing
from streamproc.rates.judge_accuracy import judge_accuracy
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.options import TopicSettings, WorkerSettings, applied_settings
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.stage import IncomingMessage, StageLimits, judge_messages
from streamproc.wiring import build_judge, judge_key_of

OUT = Path(__file__).resolve().parents[1] / "schemas" / "examples"
NOW = datetime(2026, 1, 5, 9, 0, 30, tzinfo=UTC)

ANSWER = AnswerEvent.model_validate(
    {
        "event_id": "evt-0001",
        "answer_id": "ans-0001",
        "conversation_id": "conv-42",
        "tenant": "acme",
        "assistant_id": "sap-helpdesk",
        "model": "example-llm-2026-01",
        "occurred_at": "2026-01-05T09:00:12Z",
        "question": "Why is the invoice for purchase order 4500017311 blocked?",
        "answer": "The supplier delivered 80 of 100 pieces [D07]. The invoice stays blocked "
        "until the plant manager signs a waiver [D06].",
        "evidence": [
            {
                "id": "D07",
                "kind": "passage",
                "source": "help-notes/D07",
                "text": "Case: quantity variance on purchase order 4500017311. The supplier "
                "delivered 90 of 100 pieces but invoiced all 100. The invoice was blocked for "
                "payment.",
            },
            {
                "id": "D06",
                "kind": "policy",
                "text": "A quantity or price variance above the tolerance blocks the invoice "
                "for payment until someone resolves it.",
            },
            {
                "id": "PO-4500017311",
                "kind": "record",
                "text": "purchase order 4500017311: ordered 100, received 90, status BLOCKED",
                "fields": {"po": "4500017311", "ordered": 100, "received": 90, "status": "BLOCKED"},
            },
        ],
        "tokens": [
            {"text": "The", "logprob": -0.01, "offset": 0},
            {"text": " supplier", "logprob": -0.05, "offset": 3},
        ],
    }
)


def examples() -> dict[str, BaseModel]:
    """Every example, by schema name, from one run of the default judge."""
    settings = JudgeSettings()
    key = judge_key_of(settings)
    raw = ANSWER.model_dump_json(exclude_none=True).encode()
    output = judge_messages(
        [
            IncomingMessage(
                raw,
                MessageOrigin("assistant.answers", 0, 17, b"conv-42"),
                "4bf92f3577b34da6a3ce929d0e0e4736",
            ),
            IncomingMessage(
                b'{"event_id": "evt-0002", "answer": ',
                MessageOrigin("assistant.answers", 1, 3, b"conv-43"),
            ),
        ],
        build_judge(settings),
        limits=StageLimits(
            max_event_bytes=512 * 1024,
            audit_settings=applied_settings(settings, WorkerSettings(), TopicSettings()),
            review=ReviewSampling(rate=0.02, judge_key=key),
        ),
        now=NOW,
    )
    # The clock is fixed by ``now``; only the measured judge time varies between runs.
    fixed = {"timings": Timings(judge_ms=1.8, batch_size=1, end_to_end_ms=18000.0)}
    verdict = output.verdicts[0].model_copy(update=fixed)
    timing = window_timing(
        WindowSettings(hopping=[]),
        max_event_age_s=7 * 24 * 3600,
        accuracy=judge_accuracy(key),
    )
    table: dict[str, object] = {}
    index = PartitionIndex(timing)
    outcome = output.outcomes[0].model_copy(update={"judge_ms": 1.8})  # as the verdict's
    count_outcome(table, index, outcome, partition=0, now=NOW.timestamp())
    [(_, aggregate)] = close_due(table, index, NOW.timestamp() + 62).aggregates
    letter = output.dead_letters[0]
    audit_topic = Settings.model_construct().audit.topic  # the stage's default topics
    [audit] = [r for r in output.records if r.topic == audit_topic]
    record = AuditRecord.model_validate_json(audit.value or b"")
    record = record.model_copy(update=fixed)  # the measured judge time, fixed as above
    item = output.review_items[0].model_copy(update={"judge": verdict.judge})
    decision = decide_reply(ANSWER.answer, verdict.judgement, "fail-open")
    reply = GateReply(
        decision=decision.action,
        verified=verdict.judgement.verified,
        reason=verdict.judgement.unverified_reason,
        answer_text=decision.answer_text,
        verdict=verdict,
        latency_ms=41.7,
        budget_ms=300.0,
        policy="fail-open",
    )
    return {
        "answer-event": ANSWER,
        "verdict": verdict,
        "flag": output.flags[0],
        "window-aggregate": aggregate,
        "dead-letter": letter,
        "audit-record": record,
        "answer-outcome": outcome,
        "gate-reply": reply,
        **_stream_examples(reply),
        **_review_examples(item, key),
    }


def _stream_examples(reply: GateReply) -> dict[str, BaseModel]:
    """The streaming gate's messages for the same answer, streamed."""
    first = reply.verdict.judgement.claims[0]
    sentence = ANSWER.answer[first.start : first.end]
    claims = [c for c in reply.verdict.judgement.claims if c.sentence_index == 0]
    return {
        "gate-stream-start": StreamStart(
            type="start",
            event=ANSWER.model_copy(update={"answer": ""}).model_dump(
                mode="json", exclude_none=True
            ),
            budget_ms=300.0,
        ),
        "gate-stream-delta": StreamDelta(type="delta", text=ANSWER.answer[:12]),
        "gate-stream-end": StreamEnd(type="end"),
        "gate-stream-sentence": StreamSentence(
            index=0,
            text=sentence,
            decision=sentence_decision(
                reply.verdict.judgement, sentence, verified=True, policy="fail-open"
            ),
            verified=True,
            claims=claims,
            latency_ms=38.2,
        ),
        "gate-stream-final": StreamFinal(
            **reply.model_dump(exclude={"schema_version"}), withdrawn=[]
        ),
        "gate-stream-error": StreamError(
            error="forbidden", detail="caller 'assistant-eu' may not check answers of tenant 'acme'"
        ),
    }


def rendered(name: str, model: BaseModel) -> str:
    document = model.model_dump(mode="json", exclude_none=name == "answer-event")
    return json.dumps(document, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, model in examples().items():
        path = OUT / f"{name}.json"
        text = rendered(name, model)
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
            continue
        path.write_text(text)
        print(f"wrote {path}")
    if stale:
        print(f"stale examples (run scripts/make_schema_examples.py): {', '.join(stale)}")
        return 1
    return 0


def _review_examples(item: ReviewItem, key: str) -> dict[str, BaseModel]:
    """The reviewers' loop: one reviewer disagreeing with the judge on one claim."""
    label = LabelEvent(
        label_id="lbl-0001",
        answer_id=item.answer_id,
        tenant=item.tenant,
        reviewer="alice",
        labelled_at=datetime(2026, 1, 6, 14, 2, tzinfo=UTC),
        answer_label="hallucinated",
        claims=[
            ClaimLabel(index=0, label=ClaimLabelValue.CONTRADICTED),
            ClaimLabel(index=1, label=ClaimLabelValue.SUPPORTED),
        ],
        note="90 of 100 were delivered, not 80.",
    )
    cell = AccuracyCell(
        tenant=item.tenant,
        assistant_id=item.assistant_id,
        task_type=item.task_type or "unknown",
        judge_key=key,
    )
    entry = LabelAuditEntry(
        answer_id=item.answer_id,
        tenant=item.tenant,
        assistant_id=item.assistant_id,
        label=label,
        label_sha256=hashlib.sha256(label.model_dump_json().encode()).hexdigest(),
        judge_key=key,
        judge_hallucinated=item.judgement.hallucinated,
        agrees_with_judge=item.judgement.hallucinated,
        claims_disagreeing=[],
        recorded_at=datetime(2026, 1, 6, 14, 2, 1, tzinfo=UTC),
    )
    delta = LabelDelta(
        cell=cell,
        answer_id=item.answer_id,
        label_id=label.label_id,
        answer_day=item.occurred_at.date(),
        labelled_at=label.labelled_at,
        new_answer=True,
        tp=Tally(n=1.0, w=1.0, w2=1.0),
        claims_compared=2,
        claims_agreeing=2,
    )
    # 40 flagged answers labelled (34 hallucinated), 12 of the 2 % sample (1 hallucinated).
    tp, fp = Tally(n=34, w=34, w2=34), Tally(n=6, w=6, w2=6)
    fn, tn = Tally(n=1, w=50, w2=2500), Tally(n=11, w=550, w2=27500)
    accuracy = JudgeAccuracyEvent(
        cell=cell,
        labelled_answers=52,
        labels=55,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        sensitivity=RateEstimate(estimate=34 / 84, low=0.19, high=0.66, n_effective=3.2),
        specificity=RateEstimate(estimate=550 / 556, low=0.72, high=1.0, n_effective=11.1),
        precision=RateEstimate(estimate=0.85, low=0.71, high=0.93, n_effective=40.0),
        claim_agreement=RateEstimate(estimate=0.83, low=0.77, high=0.88, n_effective=180.0),
        kappa=0.71,
        kappa_pairs=3,
        offline_sensitivity=0.74,
        offline_precision=0.54,
        drift=["sensitivity_below_offline"],
        measured_at=datetime(2026, 1, 6, 14, 2, 5, tzinfo=UTC),
    )
    drift = JudgeDriftAlert(
        alert_id=f"judge_drift:{cell.key}",
        state="firing",
        tenant=cell.tenant,
        assistant_id=cell.assistant_id,
        cell=cell,
        findings=accuracy.drift,
        sensitivity=accuracy.sensitivity.estimate,
        precision=accuracy.precision.estimate,
        offline_sensitivity=accuracy.offline_sensitivity,
        offline_precision=accuracy.offline_precision,
        labelled_answers=accuracy.labelled_answers,
        at=accuracy.measured_at,
    )
    return {
        "review-item": item,
        "label-event": label,
        "label-audit-entry": entry,
        "label-delta": delta,
        "judge-accuracy-event": accuracy,
        "judge-drift-alert": drift,
    }


if __name__ == "__main__":
    sys.exit(main())
