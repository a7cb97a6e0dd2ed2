"""Refit the answer calibrator's operating points on people's labels, for a precision.

Input: labelled answers (``review export`` rows or any benchmark JSONL) judged by the
configured judge, each reduced to what the answer decision reads (:class:`LabelledAnswer`):
its regime, its answer risk, whether a hard finding settled a claim, whether a claim has
a hard reason code. The rows are split, seeded by answer id, into a *fit* half and a
*held-out* half. Per regime (the judge's answer regimes: a summary of a record, a reply
to a question, a task over passages - each task type falls in one), the threshold is the
lowest answer risk whose precision on the fit half reaches the target with at least
``min_flagged`` answers flagged: the most recall the target allows. Where none does,
the regime becomes *hard-only*: only a record / value / name / number finding flags
(:data:`~streamproc.judge.decision.hard_findings.HARD_REASON_CODES`). Before / after is
measured on the held-out half only. Pure: no judge, no files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from streamproc.contracts.events import AnswerEvent, AnswerJudgement, EvidenceKind, VerdictLabel
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrator import REGIMES, regime, regime_of
from streamproc.judge.decision.hard_findings import has_hard_finding

__all__ = [
    "DEFAULT_MIN_FLAGGED",
    "LabelledAnswer",
    "OperatingPoint",
    "Rates",
    "RegimeReport",
    "choose_threshold",
    "fit_operating_points",
    "flagged_at",
    "in_fit_half",
    "labelled_answer",
    "rates",
    "regime_reports",
]

DEFAULT_MIN_FLAGGED: Final = 5
"""A threshold must flag at least this many fit answers: one lucky hit is no precision."""
_LOWEST, _HIGHEST = 0.0001, 0.9999  # a LinearPart threshold lies within (0, 1)


@dataclass(frozen=True, slots=True)
class LabelledAnswer:
    """One labelled answer as the judge saw it."""

    row_id: str
    task_type: str
    regime: str
    label: bool
    """People: hallucinated."""
    risk: float | None
    """The answer calibrator's risk (None: no claim was calibrated)."""
    hard: bool
    """A hard finding settled some claim as not supported (flags outside hard-only)."""
    hard_finding: bool
    """Some not-supported claim carries a hard reason code (flags in hard-only)."""
    refuted: bool
    """Some checked claim is not supported (no answer is flagged without one)."""
    flagged: bool
    """The configured judge's decision."""


def _answer_regime(event: AnswerEvent, judgement: AnswerJudgement) -> str:
    checked = [c for c in judgement.claims if c.verdict is not None and c.signals]
    if checked:
        return regime_of(checked[0].signals)
    structured = any(e.kind is EvidenceKind.RECORD for e in event.evidence)
    return regime(structured, bool(event.question))


def labelled_answer(
    row_id: str, task_type: str, label: bool, event: AnswerEvent, judgement: AnswerJudgement
) -> LabelledAnswer:
    checked = [c for c in judgement.claims if c.verdict not in (None, VerdictLabel.UNVERIFIED)]
    refuted = [c for c in checked if c.verdict is not VerdictLabel.SUPPORTED]
    settled = [c for c in refuted if not any(r.code == "CALIBRATED_RISK" for r in c.reasons)]
    return LabelledAnswer(
        row_id=row_id,
        task_type=task_type,
        regime=_answer_regime(event, judgement),
        label=label,
        risk=judgement.answer_risk,
        hard=bool(settled),
        hard_finding=any(has_hard_finding(c) for c in refuted),
        refuted=bool(refuted),
        flagged=judgement.hallucinated,
    )


def in_fit_half(row_id: str, seed: int) -> bool:
    """Seeded by answer id: the same row falls in the same half on every run and machine."""
    digest = hashlib.sha256(f"{seed}:{row_id}".encode()).digest()
    return digest[0] % 2 == 0


def flagged_at(row: LabelledAnswer, threshold: float, hard_only: bool) -> bool:
    """The judge's answer decision at ``threshold`` (``NliJudge`` and ``decide``)."""
    if hard_only:
        return row.hard_finding
    at_risk = row.risk is not None and row.risk >= threshold
    return row.refuted and (row.hard or at_risk)


@dataclass(frozen=True, slots=True)
class Rates:
    """Answer-level counts, "hallucinated" positive."""

    n: int
    positives: int
    flagged: int
    true_positives: int

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.true_positives / self.positives if self.positives else None

    @property
    def flag_share(self) -> float | None:
        return self.flagged / self.n if self.n else None

    def as_json(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "answers": self.n,
            "hallucinated": self.positives,
            "flagged": self.flagged,
            "true_positives": self.true_positives,
            "precision": rounded(self.precision),
            "recall": rounded(self.recall),
            "flag_share": rounded(self.flag_share),
        }


def rates(rows: Sequence[LabelledAnswer], flags: Sequence[bool]) -> Rates:
    return Rates(
        n=len(rows),
        positives=sum(r.label for r in rows),
        flagged=sum(flags),
        true_positives=sum(r.label and f for r, f in zip(rows, flags, strict=True)),
    )


def choose_threshold(
    rows: Sequence[LabelledAnswer], target: float, min_flagged: int = DEFAULT_MIN_FLAGGED
) -> float | None:
    """The lowest answer risk whose precision on ``rows`` reaches ``target`` with at
    least ``min_flagged`` flagged; None when no threshold does."""
    for risk in sorted({r.risk for r in rows if r.risk is not None}):
        threshold = min(max(risk, _LOWEST), _HIGHEST)
        counts = rates(rows, [flagged_at(r, threshold, False) for r in rows])
        if counts.flagged >= min_flagged and (counts.precision or 0.0) >= target:
            return threshold
    return None


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Where one regime's answer decision now stands, and why."""

    regime: str
    task_types: tuple[str, ...]
    threshold: float
    hard_only: bool
    fit: Rates | None
    """The fit half at the new operating point; None when the regime had no labels."""
    note: str


def _task_types(rows: Sequence[LabelledAnswer]) -> tuple[str, ...]:
    return tuple(sorted({r.task_type for r in rows}))


def fit_operating_points(
    rows: Sequence[LabelledAnswer],
    base: AnswerCalibrator,
    target: float,
    seed: int,
    min_flagged: int = DEFAULT_MIN_FLAGGED,
) -> dict[str, OperatingPoint]:
    """One operating point per regime, from the fit half; a regime without labelled fit
    rows keeps the base calibrator's."""
    points = {}
    for name in REGIMES:
        mine = [r for r in rows if r.regime == name and in_fit_half(r.row_id, seed)]
        kept = base.parts[name].threshold
        if not mine:
            note = "no labelled answers: kept the base calibrator's operating point"
            points[name] = OperatingPoint(name, (), kept, name in base.hard_only, None, note)
            continue
        threshold = choose_threshold(mine, target, min_flagged)
        if threshold is None:
            flags = [flagged_at(r, kept, True) for r in mine]
            note = (
                f"no threshold reaches precision {target:g} with {min_flagged}+ flagged: "
                "hard findings only"
            )
            points[name] = OperatingPoint(
                name, _task_types(mine), kept, True, rates(mine, flags), note
            )
            continue
        flags = [flagged_at(r, threshold, False) for r in mine]
        note = f"lowest threshold reaching precision {target:g}"
        points[name] = OperatingPoint(
            name, _task_types(mine), threshold, False, rates(mine, flags), note
        )
    return points


@dataclass(frozen=True, slots=True)
class RegimeReport:
    """Held-out rows of one group: the configured judge against the refit."""

    group: str
    task_types: tuple[str, ...]
    before: Rates
    after: Rates
    point: OperatingPoint | None = None
    by_task: Mapping[str, tuple[Rates, Rates]] = field(default_factory=dict)


def _compare(
    rows: Sequence[LabelledAnswer], after: Callable[[LabelledAnswer], bool]
) -> tuple[Rates, Rates]:
    return rates(rows, [r.flagged for r in rows]), rates(rows, [after(r) for r in rows])


def regime_reports(
    rows: Sequence[LabelledAnswer], points: Mapping[str, OperatingPoint], seed: int
) -> list[RegimeReport]:
    """Before / after on the held-out half: one report per regime with rows, then all."""

    def after(row: LabelledAnswer) -> bool:
        point = points[row.regime]
        return flagged_at(row, point.threshold, point.hard_only)

    held = [r for r in rows if not in_fit_half(r.row_id, seed)]
    reports = []
    for name in REGIMES:
        mine = [r for r in held if r.regime == name]
        if not mine:
            continue
        by_task = {
            t: _compare([r for r in mine if r.task_type == t], after) for t in _task_types(mine)
        }
        before, later = _compare(mine, after)
        reports.append(RegimeReport(name, _task_types(mine), before, later, points[name], by_task))
    before, later = _compare(held, after)
    reports.append(RegimeReport("all", _task_types(held), before, later))
    return reports
