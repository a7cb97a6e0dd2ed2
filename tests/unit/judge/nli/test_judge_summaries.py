"""Summary-shaped behaviours of the NLI judge, with fake models: sentences about the
document, composed premises, negation by regime and the answer-level decision."""

from __future__ import annotations

from typing import Any

import pytest

from streamproc.contracts.events import Action, AnswerEvent, ClaimClass, VerdictLabel
from streamproc.judge.decision.answer import ANSWER_FEATURES, AnswerCalibrator
from streamproc.judge.decision.calibrator import REGIMES, VerdictCalibrator
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from tests.unit.judge.nli.test_judge import event as nli_event
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

QUAKE = (
    "A magnitude 7.8 quake struck central Nepal on Saturday. "
    "Markets in the capital reopened on Monday after the holiday. "
    "Landslides blocked the roads to the mountain villages, so rescue teams waited."
)
CUT_OFF = "Rescue teams could not reach the mountain villages."


def event(answer: str, *, question: str | None = None, text: str = QUAKE) -> AnswerEvent:
    """A summary (no question) unless ``question`` is given: the regime decides."""
    return nli_event(answer, [{"id": "D1", "text": text}], question=question)


def calibrator(
    intercept: float, threshold: float = 0.5, flip_weight: float = 0.0
) -> VerdictCalibrator:
    """A claim calibrator whose risk depends on the negation flip alone."""
    part = {
        "mean": [0.0],
        "scale": [1.0],
        "coef": [flip_weight],
        "intercept": intercept,
        "threshold": threshold,
    }
    payload = {"name": "cal", "features": ["negation_flip"], "regimes": {r: part for r in REGIMES}}
    return VerdictCalibrator.from_payload(payload, sha256="2" * 64)


def answer_calibrator(threshold: float, claim_calibrator: str = "cal") -> AnswerCalibrator:
    part = {
        "mean": [0.0, 0.0],
        "scale": [1.0, 1.0],
        "coef": [1.0, 0.0],
        "intercept": 0.0,
        "threshold": threshold,
    }
    payload = {
        "name": "answers",
        "features": list(ANSWER_FEATURES),
        "claim_calibrator": claim_calibrator,
        "regimes": {r: part for r in REGIMES},
    }
    return AnswerCalibrator.from_payload(payload, sha256="3" * 64)


def nli(
    scorer: OverlapScorer,
    embedder: BagOfWordsEmbedder,
    *,
    calibrator: VerdictCalibrator | None = None,
    answer_calibrator: AnswerCalibrator | None = None,
    **options: Any,
) -> NliJudge:
    for regimes in ("composed_premise_regimes", "hard_negation_regimes"):
        if regimes in options:
            options[regimes] = frozenset(options[regimes])
    return NliJudge(
        scorer,
        embedder,
        NliOptions(thresholds=NliThresholds(entailment=0.9), granularity="sentence", **options),
        calibrator=calibrator,
        answer_calibrator=answer_calibrator,
    )


FUSED = "The quake struck Nepal and landslides blocked the roads to mountain villages."


def test_a_fused_sentence_is_supported_by_its_sentences_read_together(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder, composed_premise_regimes=("task",))
    [summary] = judge.judge_batch([event(FUSED)])
    [claim] = summary.claims
    assert claim.verdict is VerdictLabel.SUPPORTED
    assert claim.reasons[0].startswith("COMPOSED_PREMISE: 1.00 from 3 sentences of D1")
    asked = [premise for call in scorer.pairs for premise, _ in call]
    assert QUAKE in asked, "the composed premise keeps the document's order"
    assert judge.info.thresholds["composed_premise_task"] == 1.0
    assert judge.info.thresholds["composed_premise_question"] == 0.0


def test_composed_premises_are_asked_only_in_their_regimes(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder, composed_premise_regimes=("task",))
    [reply] = judge.judge_batch([event(FUSED, question="What happened in Nepal?")])
    assert reply.claims[0].verdict is VerdictLabel.UNSUPPORTED
    assert all(premise != QUAKE for call in scorer.pairs for premise, _ in call)
    [off] = nli(scorer, embedder).judge_batch([event(FUSED)])
    assert off.claims[0].verdict is VerdictLabel.UNSUPPORTED
    assert "entail_logit_composed" in off.claims[0].signals


def test_the_article_discusses_x_is_checked_for_topic_not_entailment(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder)
    on_topic, off_topic = judge.judge_batch(
        [
            event("The article discusses the quake in Nepal and the landslides on mountain roads."),
            event("The article discusses the election campaign of Kathmandu's mayor."),
        ]
    )
    [about] = on_topic.claims
    assert about.claim_class is ClaimClass.DOCUMENT
    assert about.verdict is VerdictLabel.SUPPORTED
    assert about.reasons[0].startswith("ABOUT_DOCUMENT")
    [astray] = off_topic.claims
    assert astray.verdict is VerdictLabel.UNSUPPORTED
    assert astray.reasons[0].startswith("TOPIC_NOT_IN_EVIDENCE")
    assert not scorer.pairs or all(
        "article" not in hypothesis.lower() for call in scorer.pairs for _, hypothesis in call
    ), "the topic check needs no model"


def test_the_author_argues_that_y_is_read_as_y(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    [result] = nli(scorer, embedder).judge_batch(
        [event("The author notes that markets in the capital reopened on Monday.")]
    )
    [claim] = result.claims
    assert claim.claim_class is ClaimClass.DOCUMENT
    assert claim.verdict is VerdictLabel.SUPPORTED
    hypotheses = {h for call in scorer.pairs for _, h in call}
    assert hypotheses == {"Markets in the capital reopened on Monday."}


FLIPPED = "Rescue teams could reach the mountain villages."


@pytest.mark.parametrize(
    ("question", "hard", "verdict"),
    [
        (None, ("question",), VerdictLabel.SUPPORTED),  # a task: the calibrator decides
        ("Could rescuers get there?", ("question",), VerdictLabel.CONTRADICTED),
        (None, REGIMES, VerdictLabel.CONTRADICTED),
    ],
)
def test_a_negation_flip_settles_only_where_it_is_hard(
    scorer: OverlapScorer,
    embedder: BagOfWordsEmbedder,
    question: str | None,
    hard: tuple[str, ...],
    verdict: VerdictLabel,
) -> None:
    judge = nli(scorer, embedder, calibrator=calibrator(-5.0), hard_negation_regimes=hard)
    [result] = judge.judge_batch([event(FLIPPED, question=question, text=CUT_OFF)])
    [claim] = result.claims
    assert claim.verdict is verdict
    assert claim.signals["negation_flip"] == 1.0
    assert any(r.startswith("NEGATION_FLIP") for r in claim.reasons) is (
        verdict is VerdictLabel.CONTRADICTED
    )


def test_the_answer_calibrator_clears_a_low_risk_answer_and_keeps_the_claim_verdicts(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    claims = calibrator(0.0, threshold=0.4)  # every claim: risk 0.5, not supported
    unsupported = "Tourists were evacuated by helicopter from the mountain villages."
    flagged = nli(scorer, embedder, calibrator=claims, answer_calibrator=answer_calibrator(0.4))
    cleared = nli(scorer, embedder, calibrator=claims, answer_calibrator=answer_calibrator(0.6))
    [high] = flagged.judge_batch([event(unsupported)])
    [low] = cleared.judge_batch([event(unsupported)])
    assert high.hallucinated and high.answer_risk == 0.5 and high.action is not Action.PASS
    assert low.claims[0].verdict is VerdictLabel.UNSUPPORTED, "the claim keeps its verdict"
    assert not low.hallucinated and low.action is Action.PASS and low.severity is None
    assert low.answer_risk == 0.5
    assert cleared.info.thresholds["answer_threshold_task"] == 0.6
    assert "answers" in cleared.info.models


def test_a_hard_finding_flags_the_answer_whatever_its_risk(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(
        scorer,
        embedder,
        calibrator=calibrator(-5.0),
        answer_calibrator=answer_calibrator(0.99),
        hard_negation_regimes=REGIMES,
    )
    [result] = judge.judge_batch([event(FLIPPED, text=CUT_OFF)])
    assert result.hallucinated and result.severity == "contradicted"


def test_an_answer_calibrator_needs_the_claim_calibrator_it_was_fitted_on(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    with pytest.raises(ValueError, match="give a calibrator"):
        nli(scorer, embedder, answer_calibrator=answer_calibrator(0.5))
    with pytest.raises(ValueError, match="fitted on the risks of 'other'"):
        nli(
            scorer,
            embedder,
            calibrator=calibrator(0.0),
            answer_calibrator=answer_calibrator(0.5, "other"),
        )


def test_document_claims_can_be_switched_off_to_measure_them(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder, document_claims=False)
    [result] = judge.judge_batch(
        [event("The author notes that markets in the capital reopened on Monday.")]
    )
    [claim] = result.claims
    assert claim.claim_class is ClaimClass.RULE
    assert claim.verdict is VerdictLabel.UNSUPPORTED
    assert judge.info.thresholds["document_claims"] == 0.0
