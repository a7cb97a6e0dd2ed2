"""Fitting the answer calibrator: per regime, the threshold the calibrate rows choose."""

from __future__ import annotations

import numpy as np
import pytest

from streamproc.contracts.reasons import Reason
from streamproc.evaluate.calibration import collect as collect_module
from streamproc.evaluate.calibration.answer_fit import AnswerRow, fit_answer_parts, flags
from streamproc.judge.decision.answer import ANSWER_FEATURES
from streamproc.judge.decision.calibrator import REGIMES


def rows(regime: str, spread: float) -> list[AnswerRow]:
    """Hallucinated answers have one risky claim; faithful ones many mildly risky ones."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(60):
        bad = float(np.clip(0.6 + spread * rng.standard_normal(), 0.01, 0.99))
        out.append(AnswerRow("src", regime, True, False, True, (bad, 0.1)))
        mild = tuple(
            float(np.clip(0.35 + spread * rng.standard_normal(), 0.01, 0.99)) for _ in range(6)
        )
        out.append(AnswerRow("src", regime, False, False, True, mild))
    return out


def test_the_threshold_separates_what_the_claim_rule_could_not() -> None:
    data = [row for regime in REGIMES for row in rows(regime, 0.05)]
    parts = fit_answer_parts(data, ANSWER_FEATURES)
    for regime in REGIMES:
        mine = [r for r in data if r.regime == regime]
        part = parts[regime]
        flagged = flags(mine, part.probabilities(mine), part.model.threshold)
        assert part.score > 0.95
        assert sum(f == r.label for f, r in zip(flagged, mine, strict=True)) / len(mine) > 0.95


def test_a_hard_finding_flags_and_an_answer_without_a_refuted_claim_never_does() -> None:
    data = [row for regime in REGIMES for row in rows(regime, 0.05)]
    part = fit_answer_parts(data, ANSWER_FEATURES)["task"]
    hard = AnswerRow("src", "task", True, True, True, (0.01,))
    clean = AnswerRow("src", "task", False, False, False, (0.99,))
    assert flags([hard, clean], part.probabilities([hard, clean]), part.model.threshold) == [
        True,
        False,
    ]


def test_every_regime_needs_both_labels() -> None:
    data = (
        [r for r in rows("task", 0.05) if r.label] + rows("record", 0.05) + rows("question", 0.05)
    )
    with pytest.raises(ValueError, match="'task'"):
        fit_answer_parts(data, ANSWER_FEATURES)


@pytest.mark.parametrize(
    ("reasons", "has_question", "hard"),
    [
        (["NEGATION_FLIP: against D1"], 1.0, True),  # the question regime: hard
        (["NEGATION_FLIP: against D1"], 0.0, False),  # a task: a signal to learn from
        (["TOPIC_NOT_IN_EVIDENCE: 20% of the topic's words"], 0.0, True),
        (["NOT_ENTAILED: best 0.10 < 0.50 (D1)"], 1.0, False),
    ],
)
def test_collected_claims_are_hard_as_the_judge_treats_them(
    reasons: list[str], has_question: float, hard: bool
) -> None:
    signals = {"has_question": has_question, "structured_evidence": 0.0}
    read = [Reason.from_text(r) for r in reasons]
    assert collect_module._hard(read, signals, ("question",)) is hard
