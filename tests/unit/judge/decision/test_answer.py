"""The answer calibrator: features, decision, and refusing payloads it cannot read."""

from __future__ import annotations

import math
from typing import Any

import pytest

from streamproc.judge.decision.answer import (
    ANSWER_FEATURES,
    SORTED_RISK_FEATURES,
    AnswerCalibrator,
    answer_features,
)
from streamproc.judge.decision.calibrator import REGIMES, CalibratorError


def payload(**change: Any) -> dict[str, Any]:
    part = {
        "mean": [0.0, 0.0],
        "scale": [1.0, 1.0],
        "coef": [1.0, -1.0],
        "intercept": 0.0,
        "threshold": 0.5,
    }
    return {
        "name": "a",
        "features": list(ANSWER_FEATURES),
        "regimes": {r: part for r in REGIMES},
        **change,
    }


def test_features_are_the_top_risk_and_the_claim_count() -> None:
    values = answer_features([0.2, 0.8, 0.5])
    assert values["risk_logit_max"] == pytest.approx(math.log(4.0))
    assert values["claims_log"] == pytest.approx(math.log(4.0))


def test_more_claims_at_the_same_top_risk_lower_the_answer_risk() -> None:
    model = AnswerCalibrator.from_payload(payload(), sha256="0" * 64)
    one = model.decide("task", [0.8], hard=False)
    six = model.decide("task", [0.8, 0.1, 0.1, 0.1, 0.1, 0.1], hard=False)
    assert one.risk is not None and six.risk is not None and six.risk < one.risk
    assert one.hallucinated and not six.hallucinated
    assert model.decide("task", [0.01], hard=True).hallucinated
    assert model.decide("task", [], hard=False).risk is None


@pytest.mark.parametrize(
    "change",
    [{"features": ["risk_logit_max"]}, {"regimes": {"task": {}}}, {"name": None, "features": None}],
)
def test_payloads_it_cannot_read_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(CalibratorError):
        AnswerCalibrator.from_payload(payload(**change), sha256="0" * 64)


def test_the_sorted_risk_features_read_the_next_risks_and_the_coverage() -> None:
    values = answer_features([0.2, 0.8, 0.5], [1.0, 0.5, 0.0])
    assert values["risk_logit_2"] == pytest.approx(0.0)  # 0.5
    assert values["risk_logit_3"] == pytest.approx(math.log(0.25))  # 0.2
    assert values["coverage_mean"] == pytest.approx(0.5)
    lone = answer_features([0.8])
    assert lone["risk_logit_2"] == lone["risk_logit_3"] < -9  # a missing risk at the floor
    assert lone["coverage_mean"] == 1.0


def test_a_second_high_risk_and_low_coverage_raise_the_answer_risk() -> None:
    part = {
        "mean": [0.0] * 5,
        "scale": [1.0] * 5,
        "coef": [1.0, 1.0, 0.0, 0.0, -8.0],
        "intercept": 8.0,
        "threshold": 0.5,
    }
    sorted_risks = payload(features=list(SORTED_RISK_FEATURES), regimes={r: part for r in REGIMES})
    model = AnswerCalibrator.from_payload(sorted_risks, sha256="0" * 64)
    assert model.features == SORTED_RISK_FEATURES
    alone = model.decide("task", [0.6, 0.01], hard=False, coverages=[1.0, 1.0])
    two = model.decide("task", [0.6, 0.6], hard=False, coverages=[1.0, 1.0])
    uncovered = model.decide("task", [0.6, 0.01], hard=False, coverages=[0.2, 0.2])
    assert alone.risk is not None and two.risk is not None and uncovered.risk is not None
    assert two.risk > alone.risk and uncovered.risk > alone.risk
    assert not alone.hallucinated and two.hallucinated and uncovered.hallucinated
