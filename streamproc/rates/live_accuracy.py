"""The judge measured against reviewers on live traffic - pure arithmetic, no Kafka.

Review items are a two-phase sample: every flagged answer is reviewed (inclusion
probability 1), passed ones only at a sample rate p (say 2 %). Counting labels as they come
would then over-represent flagged answers and make the judge look far more sensitive than
it is. Each labelled answer is weighted by 1 / p instead (Horvitz-Thompson), so a passed
answer sampled at 2 % stands for 50 passed answers, and a proportion is the Hajek ratio of
weighted totals, e.g. sensitivity = W(tp) / (W(tp) + W(fn)). Precision only involves
flagged answers (weight 1) and is the plain share.

An answer counts once however many reviewers label it: each of its k answer labels that are
not "can't tell" carries 1/k of it (a share ``s``: ``n = s``, ``w = weight * s``,
``w2 = weight**2 * s``), so a second reviewer moves half the first one's weight and two
agreeing reviewers leave the tallies as one would. Can't-tell labels carry nothing.

Intervals: weights make a sample less informative than its size (one missed hallucination
at weight 50 next to nine caught ones is not ten observations). Kish's effective sample
size, ``n_eff = (sum w)**2 / sum w**2``, is the number of unweighted observations with the
same variance; the interval is Wilson's score interval for the Hajek proportion on
``n_eff`` trials (the usual effective-sample-size substitution for survey proportions; it
stays inside [0, 1] and is honest on small n, as :func:`streamproc.rates.stats.wilson_interval`
is).

Sensitivity and specificity mix the two phases: sensitivity = W(tp) / (W(tp) + W(fn))
takes tp from the flagged stratum and fn from the sampled passed one, where a handful of
labelled passed answers (each standing for 1 / p) decide how many hallucinations the judge
missed. Kish's size of the pooled labels would count 27 flagged hits and 5 passed answers
as 27-odd observations of sensitivity, and five passed answers with no miss would read as
sensitivity 1 measured on 27 - far too sure. So these two proportions take their
effective size from the design instead (:func:`two_phase_proportion`): each stratum's
share (precision among flagged, the miss rate among passed) is a binomial on the labels
actually drawn there, adjusted by one success and one failure so that no miss observed
still leaves variance; the delta method carries both into the ratio, and the effective
size is the binomial size with that variance (at most the labels behind it).

Drift: a figure falls "significantly below" the offline benchmark when its one-sided Wilson
upper bound is below the offline value, and below the cell's own trailing baseline (by
answer day) when a one-sided two-proportion z test on the effective sizes says so. Both
wait for ``min_labels`` labelled answers in what they compare. Precision also moves with
the share of hallucinated answers in the traffic: its finding says the flags are right less
often here than offline, whatever the cause.

Agreement between reviewers: Cohen's kappa on the doubly labelled answers (first reviewer
against second), chance-corrected agreement ``(p_o - p_e) / (1 - p_e)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Final

from streamproc.contracts.label_events import (
    AccuracyCell,
    AnswerLabel,
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    LabelDelta,
    RateEstimate,
    Tally,
)
from streamproc.rates.corrected_rate import ConfusionCounts

__all__ = [
    "ANSWER_LABELS",
    "CONFUSION_KEYS",
    "DRIFT_FINDINGS",
    "CellState",
    "DayTally",
    "accuracy_event",
    "add_tally",
    "answer_contribution",
    "apply_delta",
    "cohen_kappa",
    "contribution_delta",
    "drift_alert_id",
    "drift_findings",
    "inverse_probability_weight",
    "live_confusion",
    "pair_key",
    "prune_days",
    "step_drift",
    "two_phase_proportion",
    "weighted_proportion",
]

CONFUSION_KEYS: Final = ("tp", "fp", "fn", "tn")
ANSWER_LABELS: Final[tuple[AnswerLabel, AnswerLabel]] = ("hallucinated", "faithful")
DRIFT_FINDINGS: Final = (
    "sensitivity_below_offline",
    "precision_below_offline",
    "sensitivity_below_baseline",
    "precision_below_baseline",
)
"""Every finding :func:`drift_findings` can report (a bounded metric label)."""

_EPS: Final = 1e-9
"""Label shares (``Tally.n``) below this are float noise left by deltas that cancel (a
label moved away): no labels. Shares, not weights, are tested: they are counts of
answers, whatever the weights' size."""
_ZERO: Final = Tally()


# ----------------------------------------------------------------------- tallies


def add_tally(a: Tally, b: Tally, sign: float = 1.0) -> Tally:
    """``a + sign * b``, field by field."""
    return Tally(n=a.n + sign * b.n, w=a.w + sign * b.w, w2=a.w2 + sign * b.w2)


# ------------------------------------------------------------------------ state


@dataclass(slots=True)
class DayTally:
    """One answer day of a cell: the drift baselines are sums of these."""

    tp: Tally = _ZERO
    fp: Tally = _ZERO
    fn: Tally = _ZERO
    tn: Tally = _ZERO
    labelled_answers: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k).model_dump() for k in CONFUSION_KEYS},
            "labelled_answers": self.labelled_answers,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DayTally:
        return cls(
            **{k: Tally.model_validate(data.get(k, {})) for k in CONFUSION_KEYS},
            labelled_answers=int(data.get("labelled_answers", 0)),
        )

    def add(self, other: DayTally) -> None:
        for k in CONFUSION_KEYS:
            setattr(self, k, add_tally(getattr(self, k), getattr(other, k)))
        self.labelled_answers += other.labelled_answers


@dataclass(slots=True)
class CellState:
    """The accuracy loop's state for one :class:`AccuracyCell` (JSON-serialisable, kept
    in the changelog topic)."""

    tp: Tally = _ZERO
    fp: Tally = _ZERO
    fn: Tally = _ZERO
    tn: Tally = _ZERO
    labelled_answers: int = 0
    labels: int = 0
    claims_compared: int = 0
    claims_agreeing: int = 0
    pairs: dict[str, int] = field(default_factory=dict)
    """``pair_key(first, second)`` -> doubly labelled answers, for Cohen's kappa."""
    by_day: dict[str, DayTally] = field(default_factory=dict)
    """ISO answer day -> that day's tallies (see :func:`prune_days`)."""
    drift_firing: list[str] = field(default_factory=list)
    """The findings of the drift alert last emitted as firing; empty: none is firing."""

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k).model_dump() for k in CONFUSION_KEYS},
            "labelled_answers": self.labelled_answers,
            "labels": self.labels,
            "claims_compared": self.claims_compared,
            "claims_agreeing": self.claims_agreeing,
            "pairs": dict(self.pairs),
            "by_day": {day: tally.to_json() for day, tally in sorted(self.by_day.items())},
            "drift_firing": list(self.drift_firing),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellState:
        return cls(
            **{k: Tally.model_validate(data.get(k, {})) for k in CONFUSION_KEYS},
            labelled_answers=int(data.get("labelled_answers", 0)),
            labels=int(data.get("labels", 0)),
            claims_compared=int(data.get("claims_compared", 0)),
            claims_agreeing=int(data.get("claims_agreeing", 0)),
            pairs={str(k): int(v) for k, v in data.get("pairs", {}).items()},
            by_day={str(d): DayTally.from_json(t) for d, t in data.get("by_day", {}).items()},
            drift_firing=[str(f) for f in data.get("drift_firing", [])],
        )

    def day_range(self, first: date, last: date) -> DayTally:
        """The tallies of the answer days ``first`` to ``last``, both included."""
        total = DayTally()
        for day, tally in self.by_day.items():
            if first <= date.fromisoformat(day) <= last:
                total.add(tally)
        return total


def pair_key(first: AnswerLabel, second: AnswerLabel) -> str:
    """The key of a reviewer pair in :attr:`CellState.pairs`: ``"hallucinated|faithful"``."""
    return f"{first}|{second}"


def apply_delta(state: CellState, delta: LabelDelta) -> None:
    """Add one label's delta to its cell's state (in place)."""
    for k in CONFUSION_KEYS:
        setattr(state, k, add_tally(getattr(state, k), getattr(delta, k)))
    state.labels += 1
    state.labelled_answers += int(delta.new_answer)
    state.claims_compared += delta.claims_compared
    state.claims_agreeing += delta.claims_agreeing
    if delta.reviewer_pair is not None:
        key = pair_key(*delta.reviewer_pair)
        state.pairs[key] = state.pairs.get(key, 0) + 1
    day = state.by_day.setdefault(delta.answer_day.isoformat(), DayTally())
    day.add(
        DayTally(
            tp=delta.tp,
            fp=delta.fp,
            fn=delta.fn,
            tn=delta.tn,
            labelled_answers=int(delta.new_answer),
        )
    )


def prune_days(state: CellState, *, today: date, keep_days: int) -> None:
    """Forget answer days older than ``keep_days`` before ``today`` (the drift test reads
    recent_days + baseline_days of them); the cell's totals keep them."""
    oldest = today - timedelta(days=keep_days - 1)
    for day in [d for d in state.by_day if date.fromisoformat(d) < oldest]:
        del state.by_day[day]


# ------------------------------------------------------------------ contributions


def inverse_probability_weight(inclusion_probability: float) -> float:
    """The weight of a label of an answer sampled with this probability: 1 / p."""
    if not 0 < inclusion_probability <= 1:
        raise ValueError(f"an inclusion probability is in (0, 1], not {inclusion_probability!r}")
    return 1 / inclusion_probability


def answer_contribution(
    judge_hallucinated: bool, labels: Sequence[AnswerLabel | None], weight: float
) -> dict[str, Tally]:
    """What one answer adds to its cell given all its reviewers' answer labels so far
    (``weight`` = 1 / its inclusion probability): each label that is not None carries
    1/k of the answer, k the number of such labels."""
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"a weight is positive and finite, not {weight!r}")
    told = [label for label in labels if label is not None]
    totals = dict.fromkeys(CONFUSION_KEYS, 0.0)
    for label in told:
        if label == "hallucinated":
            key = "tp" if judge_hallucinated else "fn"
        else:
            key = "fp" if judge_hallucinated else "tn"
        totals[key] += 1 / len(told)
    return {k: Tally(n=s, w=weight * s, w2=weight * weight * s) for k, s in totals.items()}


def contribution_delta(before: Mapping[str, Tally], after: Mapping[str, Tally]) -> dict[str, Tally]:
    """``after - before`` per confusion cell (negative parts are normal: a second label
    takes part of the first one's share)."""
    return {
        k: add_tally(after.get(k, _ZERO), before.get(k, _ZERO), sign=-1.0) for k in CONFUSION_KEYS
    }


# ---------------------------------------------------------------- proportions


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score interval of proportion ``p`` on (possibly fractional) ``n`` trials."""
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z2 / (4 * n * n))) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def weighted_proportion(hits: Tally, misses: Tally, *, z: float = 1.96) -> RateEstimate:
    """The Hajek proportion ``hits.w / (hits.w + misses.w)`` with a Wilson interval on the
    Kish effective sample size of the denominator; no estimate when there are no labels."""
    total = add_tally(hits, misses)
    if total.n < _EPS or total.w <= 0 or total.w2 <= 0:
        return RateEstimate(estimate=None, low=None, high=None, n_effective=0.0)
    p = min(1.0, max(0.0, hits.w / total.w))
    n_eff = total.w * total.w / total.w2
    low, high = _wilson(p, n_eff, z)
    return RateEstimate(estimate=p, low=min(low, p), high=max(high, p), n_effective=n_eff)


def two_phase_proportion(
    hits: Tally,
    misses: Tally,
    *,
    hits_stratum_other: Tally,
    misses_stratum_other: Tally,
    z: float = 1.96,
) -> RateEstimate:
    """Sensitivity (``hits`` = tp, ``misses`` = fn) or specificity (tn, fp) with an
    effective size from the two-phase design (module notes). Each of ``hits`` and
    ``misses`` lies in one judge stratum, next to the labels of the other truth in that
    stratum: for sensitivity, tp shares the flagged stratum with fp
    (``hits_stratum_other``) and fn the passed one with tn (``misses_stratum_other``)."""
    total = add_tally(hits, misses)
    if total.n < _EPS or total.w <= 0:
        return RateEstimate(estimate=None, low=None, high=None, n_effective=0.0)
    p = min(1.0, max(0.0, hits.w / total.w))
    mass_a, share_a, var_a = _stratum(hits, hits_stratum_other)
    mass_b, share_b, var_b = _stratum(misses, misses_stratum_other)
    a, b = mass_a * share_a, mass_b * share_b
    variance = _ratio_variance(a, mass_a * mass_a * var_a, b, mass_b * mass_b * var_b)
    adjusted = a / (a + b)
    labels = total.n
    n_eff = labels if variance <= 0 else min(labels, adjusted * (1 - adjusted) / variance)
    n_eff = max(n_eff, _EPS)
    low, high = _wilson(p, n_eff, z)
    return RateEstimate(estimate=p, low=min(low, p), high=max(high, p), n_effective=n_eff)


def _stratum(share_of: Tally, rest: Tally) -> tuple[float, float, float]:
    """One judge stratum: its weighted size, the adjusted share ``(x + 1) / (n + 2)`` of
    ``share_of`` among its labels, and that share's binomial variance."""
    n = share_of.n + rest.n
    share = (share_of.n + 1) / (n + 2)
    return share_of.w + rest.w, share, share * (1 - share) / (n + 2)


def _ratio_variance(a: float, var_a: float, b: float, var_b: float) -> float:
    """Var(a / (a + b)) by the delta method, a and b independent."""
    total = a + b
    if total <= 0:
        return 0.0
    return (b * b * var_a + a * a * var_b) / total**4


def cohen_kappa(pairs: Mapping[str, int]) -> float | None:
    """Cohen's kappa of first against second reviewer over ``pair_key`` counts; None
    without pairs, or when chance agreement is total (both always said the same one
    label: kappa is undefined)."""
    total = sum(max(0, c) for c in pairs.values())
    if total == 0:
        return None
    first = dict.fromkeys(ANSWER_LABELS, 0)
    second = dict.fromkeys(ANSWER_LABELS, 0)
    agree = 0
    for key, count in pairs.items():
        a, _, b = key.partition("|")
        if a not in first or b not in second:
            raise ValueError(f"not a reviewer pair: {key!r}")
        first[a] += max(0, count)
        second[b] += max(0, count)
        agree += max(0, count) if a == b else 0
    observed = agree / total
    chance = sum(first[c] * second[c] for c in ANSWER_LABELS) / (total * total)
    if chance >= 1:
        return None
    return (observed - chance) / (1 - chance)


# ---------------------------------------------------------------------- drift


def _offline_precision(offline: ConfusionCounts) -> float | None:
    flagged = offline.tp + offline.fp
    return offline.tp / flagged if flagged else None


def _significantly_below(recent: RateEstimate, baseline: RateEstimate, z: float) -> bool:
    """One-sided two-proportion z test (pooled) on the effective sizes: recent < baseline."""
    p1, n1, p0, n0 = recent.estimate, recent.n_effective, baseline.estimate, baseline.n_effective
    if p1 is None or p0 is None or n1 <= 0 or n0 <= 0:
        return False
    pooled = (p1 * n1 + p0 * n0) / (n1 + n0)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n0)
    if variance <= 0:
        return False
    return (p0 - p1) / math.sqrt(variance) > z


def drift_findings(
    state: CellState,
    *,
    offline: ConfusionCounts | None,
    today: date,
    min_labels: int,
    recent_days: int,
    baseline_days: int,
    z: float,
) -> list[str]:
    """Which of :data:`DRIFT_FINDINGS` hold now (in that order). Against the offline
    figures: all the cell's labels; against the baseline: answers of the last
    ``recent_days`` days (``today`` included) against the ``baseline_days`` before."""
    findings: list[str] = []
    if offline is not None and state.labelled_answers >= min_labels:
        se = weighted_proportion(state.tp, state.fn, z=z)
        ppv = weighted_proportion(state.tp, state.fp, z=z)
        for name, live, reference in (
            ("sensitivity_below_offline", se, offline.sensitivity),
            ("precision_below_offline", ppv, _offline_precision(offline)),
        ):
            if reference is not None and live.high is not None and live.high < reference:
                findings.append(name)
    recent_start = today - timedelta(days=recent_days - 1)
    recent = state.day_range(recent_start, today)
    baseline = state.day_range(
        recent_start - timedelta(days=baseline_days), recent_start - timedelta(days=1)
    )
    if min(recent.labelled_answers, baseline.labelled_answers) >= min_labels:
        if _significantly_below(
            weighted_proportion(recent.tp, recent.fn, z=z),
            weighted_proportion(baseline.tp, baseline.fn, z=z),
            z,
        ):
            findings.append("sensitivity_below_baseline")
        if _significantly_below(
            weighted_proportion(recent.tp, recent.fp, z=z),
            weighted_proportion(baseline.tp, baseline.fp, z=z),
            z,
        ):
            findings.append("precision_below_baseline")
    return findings


def drift_alert_id(cell: AccuracyCell) -> str:
    """Stable per cell: a drift alert's firing and resolved events share it."""
    return f"judge_drift:{cell.key}"


def step_drift(
    cell: AccuracyCell, state: CellState, event: JudgeAccuracyEvent, *, now: datetime
) -> JudgeDriftAlert | None:
    """The drift alert to publish after ``event``, if any, and ``state.drift_firing``
    updated: firing when findings appear or change, resolved when they all clear, nothing
    while they stay the same (so each is emitted once)."""
    findings = list(event.drift)
    if findings == state.drift_firing:
        return None
    state.drift_firing = findings
    return JudgeDriftAlert(
        alert_id=drift_alert_id(cell),
        state="firing" if findings else "resolved",
        tenant=cell.tenant,
        assistant_id=cell.assistant_id,
        cell=cell,
        findings=findings,
        sensitivity=event.sensitivity.estimate,
        precision=event.precision.estimate,
        offline_sensitivity=event.offline_sensitivity,
        offline_precision=event.offline_precision,
        labelled_answers=event.labelled_answers,
        at=now,
    )


# ---------------------------------------------------------------------- output


def _claim_agreement(state: CellState) -> RateEstimate | None:
    compared = max(0, state.claims_compared)
    if compared == 0:
        return None
    agreeing = min(compared, max(0, state.claims_agreeing))
    p = agreeing / compared
    low, high = _wilson(p, compared, 1.96)
    return RateEstimate(estimate=p, low=low, high=high, n_effective=float(compared))


def accuracy_event(
    cell: AccuracyCell,
    state: CellState,
    *,
    offline: ConfusionCounts | None,
    findings: list[str],
    now: datetime,
) -> JudgeAccuracyEvent:
    """The cell's live accuracy as published: weighted sensitivity, specificity and
    precision with 95 % intervals, claim agreement (unweighted), reviewer kappa."""
    return JudgeAccuracyEvent(
        cell=cell,
        labelled_answers=max(0, state.labelled_answers),
        labels=max(0, state.labels),
        tp=state.tp,
        fp=state.fp,
        fn=state.fn,
        tn=state.tn,
        sensitivity=two_phase_proportion(
            state.tp, state.fn, hits_stratum_other=state.fp, misses_stratum_other=state.tn
        ),
        specificity=two_phase_proportion(
            state.tn, state.fp, hits_stratum_other=state.fn, misses_stratum_other=state.tp
        ),
        precision=weighted_proportion(state.tp, state.fp),
        claim_agreement=_claim_agreement(state),
        kappa=cohen_kappa(state.pairs),
        kappa_pairs=sum(max(0, c) for c in state.pairs.values()),
        offline_sensitivity=None if offline is None else offline.sensitivity,
        offline_precision=None if offline is None else _offline_precision(offline),
        drift=list(findings),
        measured_at=now,
    )


def live_confusion(event: JudgeAccuracyEvent, *, min_labels: int) -> ConfusionCounts | None:
    """Effective confusion counts for the windows' corrected rate: the live sensitivity
    and specificity on their two-phase effective sizes (``tp = Se * n_eff_pos``, ...), so the
    corrected rate's interval carries their uncertainty. None until the cell has
    ``min_labels`` labelled answers with some hallucinated and some faithful weight."""
    se, sp = event.sensitivity, event.specificity
    if event.labelled_answers < min_labels or se.estimate is None or sp.estimate is None:
        return None
    n_pos, n_neg = se.n_effective, sp.n_effective
    return ConfusionCounts(
        tp=se.estimate * n_pos,
        fn=(1 - se.estimate) * n_pos,
        tn=sp.estimate * n_neg,
        fp=(1 - sp.estimate) * n_neg,
    )
