"""Fitting the calibrator: the numpy logistic regression and the threshold search."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamproc.evaluate.calibration.fit import (
    balanced_accuracy,
    build_design,
    choose_threshold,
    fit_calibrator,
    fit_logistic,
    reliability_table,
)
from streamproc.rates.stats import auroc


def test_logistic_regression_recovers_known_weights() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4000, 2))
    p = 1 / (1 + np.exp(-(0.5 + 2.0 * x[:, 0] - 1.0 * x[:, 1])))
    y = (rng.random(4000) < p).astype(np.float64)
    coef, intercept = fit_logistic(x, y, np.ones(4000), l2=0.0)
    np.testing.assert_allclose(coef, [2.0, -1.0], atol=0.2)
    assert abs(intercept - 0.5) < 0.2


def _row(
    answer: str, source: str, signal: float, claim: bool | None, label: bool
) -> dict[str, Any]:
    return {
        "row_id": answer,
        "dataset": "D",
        "task": source,
        "answer_label": label,
        "claim_label": claim,
        "hard": False,
        "signals": {"s": signal},
    }


def test_multiple_instance_fit_and_threshold_separate_answers() -> None:
    rows = []
    for n in range(40):
        bad = n % 2 == 0
        # Summary answers: one suspicious claim in each hallucinated answer, no claim labels.
        rows += [
            _row(f"s{n}", "Summary", 0.0, None, bad),
            _row(f"s{n}", "Summary", 3.0 if bad else 0.2, None, bad),
        ]
        rows.append(_row(f"r{n}", "Data2txt", 2.5 if bad else -0.5, bad, bad))
    design = build_design(rows, ["s"])
    model = fit_calibrator(design, ["s"], l2=0.001)
    assert model.coef[0] > 0
    threshold, score = choose_threshold(design, model.probabilities(design.x))
    assert score == 1.0
    assert 0.05 <= threshold <= 0.95


def test_balanced_accuracy_and_reliability_bins() -> None:
    assert balanced_accuracy([(True, True), (True, False), (False, False), (False, False)]) == 0.75
    table = reliability_table(np.array([0.05, 0.07, 0.95]), np.array([0.0, 1.0, 1.0]), bins=10)
    assert table[0][:2] == ("0.0-0.1", 2) and table[0][3] == 0.5
    assert table[-1][0] == "0.9-1.0" and table[-1][3] == 1.0


def test_sign_constraints_pin_a_wrong_way_signal_to_zero() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, 2))
    y = (rng.random(3000) < 1 / (1 + np.exp(-(1.5 * x[:, 0] + 1.0 * x[:, 1])))).astype(float)
    free, _ = fit_logistic(x, y, np.ones(3000), l2=0.0)
    assert free[1] > 0.5
    constrained, _ = fit_logistic(x, y, np.ones(3000), l2=0.0, signs=[1, -1])
    assert constrained[1] == 0.0, "column 1 may only lower the risk"
    assert constrained[0] > 1.0


def test_auroc_is_the_rank_probability_with_ties_at_half() -> None:
    assert auroc([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert auroc([1, 0, 1, 0], [0.1, 0.9, 0.2, 0.8]) == 0.0
    assert auroc([1, 0], [0.5, 0.5]) == 0.5
    assert auroc([1, 1, 0], [0.7, 0.3, 0.5]) == 0.5
    assert auroc([1, 1], [0.1, 0.2]) != auroc([1, 1], [0.1, 0.2])  # NaN: one class only
