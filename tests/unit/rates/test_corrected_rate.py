"""Wilson and Rogan-Gladen / Lang-Reiczigel against published and hand-computed values,
and the interval's coverage on simulated judges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamproc.rates.corrected_rate import (
    ConfusionCounts,
    corrected_rate,
    corrected_rate_mixed,
    identifiable,
    rogan_gladen,
)
from streamproc.rates.stats import wilson_interval

# A judge measured on HaluEval QA (report split): 474 of 590 hallucinated answers
# flagged, 581 of 590 faithful ones passed.
QA = ConfusionCounts(tp=474, fn=116, tn=581, fp=9)


@pytest.mark.parametrize(
    ("hits", "n", "low", "high"),
    [
        # Newcombe (1998), Stat. Med. 17:857-872, Table I, method 3 (score, no continuity
        # correction)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombes_table(hits: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(hits, n)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-5)
    assert interval[1] == pytest.approx(high, abs=5e-5)


def test_rogan_gladen_matches_the_textbook_example() -> None:
    # epiR's epi.prev example: 23 of 150 cows test positive, Se 0.96, Sp 0.89 -> "5.1 cases
    # per 100": (23/150 + 0.89 - 1) / (0.96 + 0.89 - 1) = 0.043333 / 0.85 = 0.050980
    assert rogan_gladen(23 / 150, 0.96, 0.89) == pytest.approx(0.0509804, abs=1e-7)
    assert rogan_gladen(0.05, 0.96, 0.89) == 0.0  # below the false-positive rate: clipped
    assert rogan_gladen(0.99, 0.96, 0.89) == 1.0
    with pytest.raises(ZeroDivisionError):
        rogan_gladen(0.3, 0.5, 0.5)


def test_lang_reiczigel_interval_matches_a_hand_computation() -> None:
    # 60 of 1,000 answers flagged by the QA judge, z = 1.96 (z^2 = 3.8416):
    #   q~  = (60 + 1.9208) / 1003.8416           = 0.0616838
    #   Se~ = 475 / 592 = 0.8023649   Sp~ = 582 / 592 = 0.9831081   J~ = 0.7854730
    #   p~  = (q~ + Sp~ - 1) / J~                   = 0.0570254
    #   V   = [q~(1-q~)/1003.8416 + p~^2 Se~(1-Se~)/592 + (1-p~)^2 Sp~(1-Sp~)/592] / J~^2
    #       = [5.76578e-5 + 8.7208e-7 + 2.49186e-5] / 0.616968  = 1.35294e-4
    #   d   = 2 z^2 [p~ Se~(1-Se~)/592 - (1-p~) Sp~(1-Sp~)/592]  = -8.5874e-5
    #   limits p~ + d -+ 1.96 sqrt(V) = 0.0569395 -+ 0.0227979
    # point estimate (raw Rogan-Gladen): (0.06 + 581/590 - 1) / (474/590 + 581/590 - 1)
    #   = 0.0447458 / 0.7881356 = 0.0567742
    result = corrected_rate(60, 1000, QA)
    assert result.identifiable
    assert result.observed == 0.06
    assert result.youden == pytest.approx(0.7881356, abs=1e-7)
    assert result.estimate == pytest.approx(0.0567742, abs=1e-7)
    assert result.low == pytest.approx(0.0341416, abs=1e-6)
    assert result.high == pytest.approx(0.0797375, abs=1e-6)
    assert not result.clipped


def test_fewer_flags_than_the_false_positive_rate_clip_to_zero_and_say_so() -> None:
    result = corrected_rate(0, 1000, QA)
    assert (result.estimate, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.clipped


@pytest.mark.parametrize(
    ("judge", "why"),
    [
        (ConfusionCounts(tp=38, fn=0, tn=0, fp=32), "flags everything: J = 0"),
        (ConfusionCounts(tp=55, fn=45, tn=55, fp=45), "J = 0.1 on 200 cases"),
        (ConfusionCounts(tp=15, fn=2, tn=14, fp=28), "J = 0.22 but its 95 % interval holds 0"),
        (ConfusionCounts(tp=5, fn=0, tn=0, fp=0), "no faithful answers measured"),
    ],
)
def test_not_identifiable_judges_get_no_estimate(judge: ConfusionCounts, why: str) -> None:
    result = corrected_rate(30, 100, judge)
    assert not result.identifiable, why
    assert (result.estimate, result.low, result.high) == (None, None, None)
    assert result.observed == 0.3


def test_identifiable_needs_youden_above_the_threshold_and_measured_apart_from_zero() -> None:
    assert identifiable(QA)
    assert identifiable(ConfusionCounts(tp=600, fn=400, tn=600, fp=400))  # J = 0.2, n large
    assert not identifiable(ConfusionCounts(tp=600, fn=400, tn=600, fp=400), min_youden=0.25)
    assert not identifiable(ConfusionCounts(tp=6, fn=4, tn=6, fp=4))  # J = 0.2 on 20 cases


def test_mixed_task_types_weigh_estimates_by_answers_and_add_variances() -> None:
    data2txt = ConfusionCounts(tp=27, fn=11, tn=24, fp=8)
    alone_qa = corrected_rate(60, 1000, QA)
    alone_d2t = corrected_rate(40, 200, data2txt)
    mixed = corrected_rate_mixed([(60, 1000, QA), (40, 200, data2txt), (0, 0, QA)])
    assert mixed.n == 1200 and mixed.observed == pytest.approx(100 / 1200)
    assert alone_qa.estimate is not None and alone_d2t.estimate is not None
    assert mixed.estimate == pytest.approx(
        (1000 * alone_qa.estimate + 200 * alone_d2t.estimate) / 1200
    )
    assert mixed.low is not None and mixed.high is not None and mixed.estimate is not None
    assert mixed.low < mixed.estimate < mixed.high
    summary = ConfusionCounts(tp=15, fn=2, tn=14, fp=28)
    assert not corrected_rate_mixed([(60, 1000, QA), (1, 10, summary)]).identifiable
    assert corrected_rate(0, 0, QA).estimate is None


def test_flagged_must_fit_in_n() -> None:
    with pytest.raises(ValueError):
        corrected_rate(11, 10, QA)


@pytest.mark.parametrize(
    ("truth", "se", "sp", "n", "n_pos", "n_neg"),
    [
        (0.10, 0.80, 0.985, 1000, 590, 590),  # the QA judge on a busy window
        (0.30, 0.71, 0.75, 300, 38, 32),  # the Data2txt judge: few validation answers
        (0.05, 0.80, 0.985, 100, 590, 590),  # a quiet window
    ],
)
def test_the_interval_covers_the_truth_about_95_percent_of_the_time(
    truth: float, se: float, sp: float, n: int, n_pos: int, n_neg: int
) -> None:
    """Every source of error drawn anew each round: the validation counts behind Se and Sp
    and the window's flags; the interval should hold the truth about 95 % of the time."""
    rng = np.random.default_rng(20261201)
    rounds = 1500
    covered = counted = 0
    flag_rate = truth * se + (1 - truth) * (1 - sp)
    for _ in range(rounds):
        tp = int(rng.binomial(n_pos, se))
        tn = int(rng.binomial(n_neg, sp))
        judge = ConfusionCounts(tp=tp, fn=n_pos - tp, tn=tn, fp=n_neg - tn)
        result = corrected_rate(int(rng.binomial(n, flag_rate)), n, judge)
        if result.identifiable:
            assert result.low is not None and result.high is not None
            counted += 1
            covered += result.low <= truth <= result.high
    assert counted > 0.95 * rounds
    assert 0.93 <= covered / counted <= 0.98


def test_fractional_effective_counts_are_read_as_observations() -> None:
    # Effective counts from weighted reviewer labels, 590 positives and 590 negatives:
    #   Se~ = 475.5 / 592 = 0.8032095   Sp~ = 581.5 / 592 = 0.9822635   J~ = 0.7854730
    #   q~  = 0.0616838 (60 of 1,000)    p~ = 0.0559502
    #   V   = 1.373186e-4;  d = -9.86803e-5;  p~ + d -+ 1.96 sqrt(V) = 0.0558515 -+ 0.0229679
    # point estimate: (0.06 + 580.5/590 - 1) / (474.5/590 + 580.5/590 - 1) = 0.0556989
    judge = ConfusionCounts(tp=474.5, fn=115.5, tn=580.5, fp=9.5)
    result = corrected_rate_mixed([(60, 1000, judge)])
    assert result.identifiable
    assert result.youden == pytest.approx(465 / 590, abs=1e-12)
    assert result.estimate == pytest.approx(0.0556989, abs=1e-7)
    assert result.low == pytest.approx(0.0328836, abs=1e-6)
    assert result.high == pytest.approx(0.0788194, abs=1e-6)
    # whole numbers given as floats change nothing
    assert corrected_rate(60, 1000, ConfusionCounts(tp=474.0, fn=116.0, tn=581.0, fp=9.0)) == (
        corrected_rate(60, 1000, QA)
    )
    assert not identifiable(ConfusionCounts(tp=6.5, fn=3.5, tn=6.5, fp=3.5))  # 20 effective


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_counts_are_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        ConfusionCounts(tp=1, fn=bad, tn=1, fp=0)
