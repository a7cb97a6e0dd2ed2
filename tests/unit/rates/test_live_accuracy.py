"""Live accuracy against hand computations: inverse-probability weights, the split of an
answer between its reviewers, Kish-Wilson intervals, Cohen's kappa, drift findings and
the effective counts handed to the corrected rate."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from streamproc.contracts.label_events import AccuracyCell, AnswerLabel, LabelDelta, Tally
from streamproc.rates.corrected_rate import ConfusionCounts, corrected_rate_mixed
from streamproc.rates.live_accuracy import (
    CellState,
    accuracy_event,
    add_tally,
    answer_contribution,
    apply_delta,
    cohen_kappa,
    contribution_delta,
    drift_findings,
    inverse_probability_weight,
    live_confusion,
    pair_key,
    prune_days,
    step_drift,
    weighted_proportion,
)

CELL = AccuracyCell(tenant="acme", assistant_id="bot", task_type="QA", judge_key="nli-v3")
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
TODAY = NOW.date()
# Se 0.8, precision 80 / 90: the shipped benchmark figures of the drift tests.
OFFLINE = ConfusionCounts(tp=80, fn=20, tn=90, fp=10)
_serial = iter(range(1_000_000))


def tally(n: float, weight: float = 1.0) -> Tally:
    """``n`` whole answers of one weight."""
    return Tally(n=n, w=n * weight, w2=n * weight * weight)


def delta(
    kind: str,
    *,
    weight: float = 1.0,
    day: date = TODAY,
    pair: tuple[AnswerLabel, AnswerLabel] | None = None,
    claims: tuple[int, int] = (0, 0),
) -> LabelDelta:
    """One new answer's first label, counted in confusion cell ``kind``."""
    serial = next(_serial)
    return LabelDelta(
        cell=CELL,
        answer_id=f"a{serial}",
        label_id=f"l{serial}",
        answer_day=day,
        labelled_at=NOW,
        new_answer=True,
        claims_compared=claims[0],
        claims_agreeing=claims[1],
        reviewer_pair=pair,
        **{kind: tally(1, weight)},
    )


def state_of(*deltas: LabelDelta) -> CellState:
    state = CellState()
    for d in deltas:
        apply_delta(state, d)
    return state


def many(kind: str, count: int, **kwargs: Any) -> list[LabelDelta]:
    return [delta(kind, **kwargs) for _ in range(count)]


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return centre - half, centre + half


# ------------------------------------------------------------------ contributions


def test_one_label_carries_the_whole_inverse_probability_weight() -> None:
    missed = answer_contribution(False, ["hallucinated"], 50.0)  # passed, sampled at 2 %
    assert missed["fn"] == Tally(n=1.0, w=50.0, w2=2500.0)
    assert missed["tp"] == missed["fp"] == missed["tn"] == Tally()
    assert answer_contribution(True, ["faithful"], 1.0)["fp"] == Tally(n=1.0, w=1.0, w2=1.0)
    assert answer_contribution(False, ["faithful"], 50.0)["tn"].w == 50.0
    assert answer_contribution(True, ["hallucinated"], 1.0)["tp"].n == 1.0


def test_a_second_reviewer_takes_half_the_weight_and_cant_tell_takes_none() -> None:
    first = answer_contribution(False, ["faithful"], 50.0)
    both = answer_contribution(False, ["faithful", "hallucinated"], 50.0)
    moved = contribution_delta(first, both)
    assert moved["tn"] == Tally(n=-0.5, w=-25.0, w2=-1250.0)
    assert moved["fn"] == Tally(n=0.5, w=25.0, w2=1250.0)
    assert moved["tp"] == moved["fp"] == Tally()
    # a third reviewer who cannot tell moves nothing; one answer never counts twice
    assert contribution_delta(
        both, answer_contribution(False, ["faithful", "hallucinated", None], 50.0)
    ) == {k: Tally() for k in ("tp", "fp", "fn", "tn")}
    agreeing = answer_contribution(False, ["faithful", "faithful"], 50.0)
    assert agreeing["tn"] == first["tn"]
    assert all(t == Tally() for t in answer_contribution(True, [None], 1.0).values())


@pytest.mark.parametrize("weight", [0.0, -1.0, math.inf, math.nan])
def test_a_weight_is_positive_and_finite(weight: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        answer_contribution(True, ["hallucinated"], weight)


# ---------------------------------------------------------------- proportions


def test_weighted_sensitivity_with_one_heavy_miss() -> None:
    # Nine flagged hallucinations (weight 1) and one missed one drawn at 2 % (weight 50):
    #   Se = 9 / (9 + 50) = 0.1525424; n_eff = 59^2 / (9 * 1 + 2500) = 3481 / 2509 = 1.387405
    # Counted unweighted it would read 9 / 10 = 0.9.
    se = weighted_proportion(tally(9), tally(1, 50.0))
    assert se.estimate == pytest.approx(9 / 59, abs=1e-12)
    assert se.n_effective == pytest.approx(3481 / 2509, abs=1e-12)
    # Wilson on 1.387405 trials: (0.0076413, 0.8079777) - honest about one heavy miss
    assert se.low == pytest.approx(0.0076413, abs=1e-7)
    assert se.high == pytest.approx(0.8079777, abs=1e-7)


def test_unit_weights_give_the_plain_wilson_interval() -> None:
    estimate = weighted_proportion(tally(81), tally(182))
    # Newcombe (1998) Table I: 81 / 263 -> (0.2553, 0.3662)
    assert estimate.estimate == pytest.approx(81 / 263)
    assert estimate.n_effective == pytest.approx(263)
    assert estimate.low == pytest.approx(0.2553, abs=5e-5)
    assert estimate.high == pytest.approx(0.3662, abs=5e-5)


def test_no_labels_is_no_estimate_even_after_deltas_cancel() -> None:
    empty = weighted_proportion(Tally(), Tally())
    assert (empty.estimate, empty.low, empty.high, empty.n_effective) == (None, None, None, 0.0)
    # A heavy label (p = 1e-4) counted, then moved away by thirds: float noise is left in
    # w2, far above 1e-9, but no share of an answer.
    heavy = inverse_probability_weight(1e-4)
    one = answer_contribution(False, ["hallucinated"], heavy)["fn"]
    left = add_tally(add_tally(add_tally(one, one, -1 / 3), one, -1 / 3), one, -1 / 3)
    assert left.n < 1e-9
    assert weighted_proportion(Tally(), left).estimate is None
    assert weighted_proportion(tally(1), left).estimate == pytest.approx(1.0)


def test_weights_are_inverse_inclusion_probabilities() -> None:
    assert inverse_probability_weight(0.02) == 50.0
    assert inverse_probability_weight(1.0) == 1.0
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="inclusion probability"):
            inverse_probability_weight(bad)


def test_cohen_kappa_on_a_known_table() -> None:
    # 50 doubly labelled answers: both hallucinated 20, first H / second F 5, F / H 10,
    # both faithful 15. p_o = 35 / 50 = 0.7; first says H 25 / 50, second 30 / 50:
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    pairs = {
        pair_key("hallucinated", "hallucinated"): 20,
        pair_key("hallucinated", "faithful"): 5,
        pair_key("faithful", "hallucinated"): 10,
        pair_key("faithful", "faithful"): 15,
    }
    assert pair_key("hallucinated", "faithful") == "hallucinated|faithful"
    assert cohen_kappa(pairs) == pytest.approx(0.4, abs=1e-12)
    assert cohen_kappa({"hallucinated|hallucinated": 3, "faithful|faithful": 2}) == 1.0
    assert cohen_kappa({}) is None
    assert cohen_kappa({"faithful|faithful": 7}) is None  # p_e = 1: undefined
    with pytest.raises(ValueError, match="reviewer pair"):
        cohen_kappa({"yes|no": 1})


# ---------------------------------------------------------------------- state


def test_deltas_add_up_in_the_state_and_its_days() -> None:
    yesterday = TODAY - timedelta(days=1)
    state = state_of(
        delta("tp", claims=(3, 2)),
        delta("fn", weight=50.0, day=yesterday),
        delta("tn", weight=50.0, pair=("faithful", "faithful")),
    )
    second = LabelDelta(
        cell=CELL,
        answer_id="a-again",
        label_id="l-second",
        answer_day=TODAY,
        labelled_at=NOW,
        new_answer=False,
        tn=Tally(n=-0.5, w=-25.0, w2=-1250.0),
        fn=Tally(n=0.5, w=25.0, w2=1250.0),
        reviewer_pair=("faithful", "hallucinated"),
    )
    apply_delta(state, second)
    assert (state.labels, state.labelled_answers) == (4, 3)
    assert state.tn == Tally(n=0.5, w=25.0, w2=1250.0)
    assert state.fn == Tally(n=1.5, w=75.0, w2=3750.0)
    assert (state.claims_compared, state.claims_agreeing) == (3, 2)
    assert state.pairs == {"faithful|faithful": 1, "faithful|hallucinated": 1}
    assert state.by_day[yesterday.isoformat()].fn.w == 50.0
    assert state.by_day[TODAY.isoformat()].labelled_answers == 2
    assert state.by_day[TODAY.isoformat()].fn.w == 25.0


def test_the_state_survives_json() -> None:
    state = state_of(
        delta("tp"), delta("fn", weight=50.0), delta("fp", pair=("faithful", "hallucinated"))
    )
    state.drift_firing = ["sensitivity_below_offline"]
    restored = CellState.from_json(json.loads(json.dumps(state.to_json())))
    assert restored == state
    assert CellState.from_json({}) == CellState()


def test_old_days_are_pruned_and_the_totals_kept() -> None:
    old = TODAY - timedelta(days=40)
    state = state_of(delta("tp", day=old), delta("tp", day=TODAY - timedelta(days=34)))
    prune_days(state, today=TODAY, keep_days=35)
    assert list(state.by_day) == [(TODAY - timedelta(days=34)).isoformat()]
    assert state.tp.n == 2


# --------------------------------------------------------------------- drift


def _drift(state: CellState, *, min_labels: int = 30) -> list[str]:
    return drift_findings(
        state,
        offline=OFFLINE,
        today=TODAY,
        min_labels=min_labels,
        recent_days=7,
        baseline_days=28,
        z=1.645,
    )


def test_a_clear_fall_below_the_offline_sensitivity_is_found() -> None:
    # 20 of 60 hallucinations caught: Se 1/3, one-sided 95 % upper bound 0.4387 < 0.8.
    # Precision 20 / 20 = 1 is above the offline 0.889: not a finding.
    state = state_of(*many("tp", 20), *many("fn", 40))
    assert _drift(state) == ["sensitivity_below_offline"]
    assert wilson(1 / 3, 60, 1.645)[1] == pytest.approx(0.4387170, abs=1e-6)


def test_a_tiny_or_merely_unlucky_sample_is_quiet() -> None:
    assert _drift(state_of(*many("fn", 5))) == []  # 5 labelled answers < 30
    # 30 answers at Se 0.7 vs 0.8 offline: upper bound 0.816, not significantly below
    assert _drift(state_of(*many("tp", 21), *many("fn", 9))) == []
    assert (
        drift_findings(
            state_of(*many("fn", 40)),
            offline=None,
            today=TODAY,
            min_labels=30,
            recent_days=7,
            baseline_days=28,
            z=1.645,
        )
        == []
    )  # no offline figures, no baseline yet


def test_a_fall_below_the_trailing_baseline_is_found() -> None:
    # Baseline (8-35 days ago): 45 of 50 caught, 45 of 50 flags right. Recent week: 15 of
    # 40 caught, 15 of 40 right. Pooled Se (45+15)/90, z = (0.9 - 0.375) / sqrt(2/3 * 1/3
    # * (1/50 + 1/40)) = 5.25 > 1.645. The offline comparison sees 60/90 and 60/90 overall,
    # both significantly below 0.8 and 0.889.
    before = TODAY - timedelta(days=10)
    state = state_of(
        *many("tp", 45, day=before),
        *many("fn", 5, day=before),
        *many("fp", 5, day=before),
        *many("tp", 15),
        *many("fn", 25),
        *many("fp", 25),
    )
    assert _drift(state) == [
        "sensitivity_below_offline",
        "precision_below_offline",
        "sensitivity_below_baseline",
        "precision_below_baseline",
    ]
    # the same fall, but the recent week holds only 10 labelled answers
    thin = state_of(
        *many("tp", 45, day=before), *many("fn", 5, day=before), *many("tp", 2), *many("fn", 8)
    )
    assert "sensitivity_below_baseline" not in _drift(thin)
    # days older than the baseline are no part of it
    ancient = TODAY - timedelta(days=7 + 28 + 1)
    stale = state_of(
        *many("tp", 45, day=ancient), *many("fn", 5, day=ancient), *many("tp", 15), *many("fn", 25)
    )
    assert "sensitivity_below_baseline" not in _drift(stale)


def test_drift_alerts_fire_once_and_resolve_once() -> None:
    state = state_of(*many("tp", 20), *many("fn", 40))
    falling = accuracy_event(CELL, state, offline=OFFLINE, findings=_drift(state), now=NOW)
    fired = step_drift(CELL, state, falling, now=NOW)
    assert fired is not None and fired.state == "firing"
    assert fired.findings == ["sensitivity_below_offline"]
    assert fired.sensitivity == pytest.approx(1 / 3) and fired.offline_sensitivity == 0.8
    assert step_drift(CELL, state, falling, now=NOW) is None
    assert state.drift_firing == ["sensitivity_below_offline"]
    recovered = falling.model_copy(update={"drift": []})
    resolved = step_drift(CELL, state, recovered, now=NOW)
    assert resolved is not None and resolved.state == "resolved"
    assert resolved.alert_id == fired.alert_id and resolved.severity == "ticket"
    assert step_drift(CELL, state, recovered, now=NOW) is None


# ---------------------------------------------------------------------- output


def test_the_event_weighs_sensitivity_and_specificity_and_not_precision() -> None:
    # Flagged answers (weight 1): 9 right, 1 wrong. Passed ones sampled at 2 % (weight 50):
    # 1 missed hallucination, 4 faithful.
    state = state_of(
        *many("tp", 9, claims=(2, 2)),
        delta("fp", claims=(2, 0)),
        delta("fn", weight=50.0),
        *many("tn", 4, weight=50.0),
    )
    event = accuracy_event(CELL, state, offline=OFFLINE, findings=[], now=NOW)
    assert (event.labelled_answers, event.labels) == (15, 15)
    assert event.sensitivity.estimate == pytest.approx(9 / 59)
    assert event.specificity.estimate == pytest.approx(200 / 201)
    # One miss at weight 50 decides sensitivity: never more sure than its 10 labels.
    assert event.sensitivity.n_effective <= 10
    assert event.sensitivity.low is not None and event.sensitivity.high is not None
    assert event.sensitivity.high - event.sensitivity.low > 0.3
    assert event.precision.estimate == pytest.approx(0.9)
    assert event.precision.n_effective == pytest.approx(10)
    assert event.claim_agreement is not None
    assert event.claim_agreement.estimate == pytest.approx(18 / 20)
    assert (event.claim_agreement.low, event.claim_agreement.high) == pytest.approx(
        wilson(0.9, 20, 1.96)
    )
    assert event.offline_sensitivity == 0.8
    assert event.offline_precision == pytest.approx(80 / 90)
    assert event.kappa is None and event.kappa_pairs == 0
    assert event.cell == CELL and event.measured_at == NOW


def test_live_confusion_waits_for_labels_of_both_kinds() -> None:
    only_positive = state_of(*many("tp", 40))
    event = accuracy_event(CELL, only_positive, offline=None, findings=[], now=NOW)
    assert live_confusion(event, min_labels=30) is None
    few = accuracy_event(
        CELL, state_of(delta("tp"), delta("tn")), offline=None, findings=[], now=NOW
    )
    assert live_confusion(few, min_labels=30) is None
    assert live_confusion(few, min_labels=2) == ConfusionCounts(tp=1.0, fn=0.0, tn=1.0, fp=0.0)


def test_live_confusion_is_the_effective_counts_and_feeds_the_corrected_rate() -> None:
    # 30 tp + 10 missed at weight 5: Se = 30/80 = 0.375; 5 fp + 45 tn at weight 5 (the
    # flagged fp weigh 1): Sp = 225/230; each on its two-phase effective size.
    state = state_of(
        *many("tp", 30), *many("fn", 10, weight=5.0), *many("fp", 5), *many("tn", 45, weight=5.0)
    )
    event = accuracy_event(CELL, state, offline=None, findings=[], now=NOW)
    counts = live_confusion(event, min_labels=30)
    assert counts is not None
    n_pos, n_neg = event.sensitivity.n_effective, event.specificity.n_effective
    assert 0 < n_pos <= 40 and 0 < n_neg <= 50  # never more than the labels behind them
    assert counts.tp == pytest.approx(0.375 * n_pos) and counts.fn == pytest.approx(0.625 * n_pos)
    assert counts.tn == pytest.approx(225 / 230 * n_neg)
    assert counts.fp == pytest.approx(5 / 230 * n_neg)
    assert counts.sensitivity == pytest.approx(0.375)
    rate = corrected_rate_mixed([(100, 1000, counts)])
    assert rate.identifiable and rate.estimate is not None
    # Rogan-Gladen on the live figures: (0.1 + 225/230 - 1) / (0.375 + 225/230 - 1)
    assert rate.estimate == pytest.approx((0.1 + 225 / 230 - 1) / (0.375 + 225 / 230 - 1))
    assert rate.low is not None and rate.high is not None
    assert rate.low < rate.estimate < rate.high


def test_no_miss_among_few_passed_labels_is_not_a_sure_sensitivity() -> None:
    # 27 flagged answers, all hallucinated; 5 passed ones sampled at 20 % (weight 5), all
    # faithful. Sensitivity reads 1.0, but only the five passed answers could have shown a
    # miss: it must not be as sure as 27 observations would make it.
    state = state_of(*many("tp", 27), *many("tn", 5, weight=5.0))
    event = accuracy_event(CELL, state, offline=None, findings=[], now=NOW)
    assert event.sensitivity.estimate == 1.0
    assert event.sensitivity.n_effective < 12
    assert event.sensitivity.low is not None and event.sensitivity.low < 0.8
    assert wilson(1.0, 27, 1.96)[0] > 0.87  # what counting the 27 hits would claim
