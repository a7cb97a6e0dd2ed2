"""Answers judged by the rules judge, a judge-accuracy event, and readers of a
WorkerMetrics registry: shared by the worker's metrics tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from streamproc.contracts.label_events import AccuracyCell, JudgeAccuracyEvent, Tally
from streamproc.inference.options import JudgeSettings
from streamproc.rates.corrected_rate import ConfusionCounts
from streamproc.rates.live_accuracy import CellState, accuracy_event
from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.stage import IncomingMessage, StageLimits, StageOutput, judge_messages
from streamproc.wiring import build_judge

OCCURRED = datetime(2026, 1, 1, tzinfo=UTC)
JUDGED = OCCURRED + timedelta(seconds=3)
EVIDENCE = "The order was shipped on Monday."


def answer(event_id: str, text: str, *, tenant: str = "t", model: str = "llm") -> dict[str, object]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": tenant,
        "assistant_id": "bot",
        "model": model,
        "occurred_at": OCCURRED.isoformat(),
        "question": "What happened to the order?",
        "answer": text,
        "evidence": [{"id": "D1", "text": EVIDENCE}],
    }


GOOD = answer("good", "Hello! The order was shipped on Monday [D1].")
BAD = answer("bad", "The order was shipped on 3 May [D1].")
ABSTAINED = answer("abstained", "I don't know.")
OTHER_TENANT = answer("other", "The order was shipped on 3 May [D1].", tenant="u", model="llm2")
FRENCH = answer("fr", "La commande a été expédiée lundi et arrivera chez vous demain matin [D1].")


def judged(*documents: object, review: ReviewSampling | None = None) -> StageOutput:
    messages = [
        IncomingMessage(
            value=d if isinstance(d, bytes) else json.dumps(d).encode(),
            origin=MessageOrigin("answers", 0, offset, b"conv"),
        )
        for offset, d in enumerate(documents)
    ]
    judge = build_judge(JudgeSettings(name="rules"))
    return judge_messages(messages, judge, limits=StageLimits(review=review), now=JUDGED)


def value(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def key(tenant: str = "t", model: str = "llm") -> dict[str, str]:
    return {"tenant": tenant, "assistant": "bot", "model": model}


CELL = AccuracyCell(tenant="t", assistant_id="bot", task_type="QA", judge_key="nli-v3")
CELL_KEY = {"tenant": "t", "assistant": "bot", "task_type": "QA", "judge": "nli-v3"}


def accuracy(
    cell: AccuracyCell = CELL, *, negatives: bool = True, drift: tuple[str, ...] = ()
) -> JudgeAccuracyEvent:
    """9 of 10 hallucinations caught, 1 false alarm among 20 faithful answers (weights 1),
    2 of 3 doubly labelled answers agreed on, 8 of 10 claims."""
    state = CellState(
        tp=Tally(n=9, w=9, w2=9),
        fn=Tally(n=1, w=1, w2=1),
        fp=Tally(n=1, w=1, w2=1) if negatives else Tally(),
        tn=Tally(n=19, w=19, w2=19) if negatives else Tally(),
        labelled_answers=30 if negatives else 10,
        labels=33,
        claims_compared=10,
        claims_agreeing=8,
        pairs={"hallucinated|hallucinated": 1, "faithful|faithful": 1, "faithful|hallucinated": 1},
    )
    return accuracy_event(
        cell,
        state,
        offline=ConfusionCounts(tp=8, fn=2, tn=9, fp=1),
        findings=list(drift),
        now=JUDGED,
    )
