"""A deterministic finding is final: no registered calibrator clears it, in any regime.

Each shipped claim calibrator (with, for the default, its answer calibrator) runs the NLI
judge over one answer per regime whose claim a record, a refused call or the absence of
any record settles. The models are stand-ins that entail every claim fully, so the
calibrator, left to itself, would call every claim supported: the verdict must still be
the hard one, with its reason code, and the answer must still be flagged.
"""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    EvidenceItem,
    EvidenceKind,
    VerdictLabel,
)
from streamproc.inference.calibrator_loader import load_answer_calibrator, load_calibrator
from streamproc.judge import NliScore
from streamproc.judge.decision.calibrator import ALL_REGIMES
from streamproc.judge.nli.judge import NliJudge
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder

MODELS = Path(__file__).resolve().parents[4] / "models"


def _calibrators() -> list[tuple[str, str | None]]:
    """(claim calibrator, an answer calibrator fitted on it or None) for every shipped one."""
    folder = MODELS / "calibrators"
    manifests = {p.stem: tomllib.loads(p.read_text()) for p in sorted(folder.glob("*.toml"))}
    answers = {
        m["claim_calibrator"]: name
        for name, m in manifests.items()
        if m.get("kind") == "answer_logistic_regression_per_regime"
    }
    return [
        (name, answers.get(name))
        for name, m in manifests.items()
        if m.get("kind") == "logistic_regression_per_regime"
    ]


class _Entails:
    """Says every premise fully entails every claim: the calibrator's case for support."""

    sha256 = "1" * 64

    def __init__(self, name: str) -> None:
        self.model_name = name

    def score(self, pairs: Any) -> list[NliScore]:
        return [NliScore(entailment=0.999, contradiction=0.0, logits=(8.0, -8.0)) for _ in pairs]


class _Embedder(BagOfWordsEmbedder):
    def __init__(self, name: str) -> None:
        self.model_name = name


NOW = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)
ORDER = {"order_id": "4500017311", "status": "processing", "total": 102.0, "currency": "EUR"}


def _answer(regime: str) -> tuple[AnswerEvent, str]:
    """An answer in ``regime`` whose one claim a deterministic check settles, and the
    reason code it settles it with."""
    question: str | None = "What happened to my order?"
    if regime == "case":
        evidence = [EvidenceItem(id="R1", text="order", kind=EvidenceKind.RECORD, fields=ORDER)]
        answer, code = "Your order total is EUR 120.", "AMOUNT_MISMATCH"
    elif regime == "record":  # a record given as JSON text, no question: a listing's regime
        text = '{"order_id": "4500017311", "status": "processing"}'
        evidence = [EvidenceItem(id="R1", text=text, kind=EvidenceKind.RECORD)]
        answer, code, question = "Your order 4500017312 is on its way.", "IDENTIFIER_MISMATCH", None
    else:  # no record at all: the agent reports doing something nothing shows
        policy = EvidenceItem(id="P1", text="Refunds take 5 days.", kind=EvidenceKind.POLICY)
        evidence = [policy]
        answer, code = "I have refunded your order.", "CLAIM_WITHOUT_TOOL_EVIDENCE"
        question = question if regime == "question" else None
    event = AnswerEvent(
        event_id=f"e-{regime}",
        answer_id=f"a-{regime}",
        conversation_id="c",
        tenant="t",
        assistant_id="s",
        model="m",
        occurred_at=NOW,
        question=question,
        answer=answer,
        evidence=evidence,
    )
    return event, code


@pytest.mark.parametrize(("claim_name", "answer_name"), _calibrators())
@pytest.mark.parametrize("regime", ALL_REGIMES)
def test_no_calibrator_clears_a_hard_finding(
    claim_name: str, answer_name: str | None, regime: str
) -> None:
    calibrator = load_calibrator(claim_name, MODELS)
    answer_calibrator = load_answer_calibrator(answer_name, MODELS) if answer_name else None
    judge = NliJudge(
        _Entails(calibrator.nli_model or "fake-nli"),
        _Embedder(calibrator.embedding_model or "fake-embedder"),
        calibrator=calibrator,
        answer_calibrator=answer_calibrator,
    )
    event, code = _answer(regime)
    judgement = judge.judge_batch([event])[0]
    claim = judgement.claims[0]
    assert claim.signals == {} or claim.risk is None  # settled before any calibrator
    assert claim.verdict in (VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED)
    assert claim.reasons[0].startswith(code)
    assert judgement.hallucinated
    assert judgement.action is not Action.PASS


def test_the_stand_in_would_support_the_same_claim_without_the_finding() -> None:
    """The test above means something: with the wrong value corrected, the same judge
    and calibrator pass the answer."""
    calibrator = load_calibrator("verdict-calibrator-verifier-v3", MODELS)
    judge = NliJudge(
        _Entails(calibrator.nli_model or ""),
        _Embedder(calibrator.embedding_model or ""),
        calibrator=calibrator,
    )
    event, _ = _answer("case")
    right = event.model_copy(update={"answer": "Your order total is EUR 102."})
    judgement = judge.judge_batch([right])[0]
    assert judgement.action is Action.PASS
    assert judgement.claims[0].verdict is VerdictLabel.SUPPORTED
