"""The replay's numbers: true, raw and corrected hallucination rates, computed with the
window loop's own functions (``WindowTotals.corrected``, the live table's
``LiveCorrection``) as if the whole replay were one window.

Pure (no broker); it changes when what the replay reports changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scripts._replay_reviews_rows import ASSISTANT, TENANT, Row
from streamproc.contracts.events import AnswerOutcome, CorrectedRate, Verdict
from streamproc.monitor.windows.live_accuracy import LiveCorrection
from streamproc.monitor.windows.panes import LiveCounts, LiveLookup, WindowTotals
from streamproc.rates.corrected_rate import ConfusionCounts
from streamproc.rates.judge_accuracy import JudgeAccuracy

__all__ = ["summarise"]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _corrected(rate: CorrectedRate | None) -> dict[str, Any] | None:
    return None if rate is None else rate.model_dump(mode="json")


def summarise(
    rows: Sequence[Row],
    outcomes: Mapping[str, AnswerOutcome],
    verdicts: Mapping[str, Verdict],
    *,
    offline: JudgeAccuracy | None,
    live: LiveCorrection,
) -> dict[str, Any]:
    """The replay's numbers (``replay_reviews.py``'s docstring, step 4). The corrected rates are the
    window loop's: one :class:`WindowTotals` of every answered answer, per task type."""
    answered = [
        r
        for r in rows
        if r.event.answer_id in verdicts and not verdicts[r.event.answer_id].judgement.abstained
    ]
    flagged = sum(verdicts[r.event.answer_id].judgement.hallucinated for r in answered)
    totals = WindowTotals()
    by_task: dict[str, dict[str, Any]] = {}
    for row in answered:
        outcome = outcomes.get(row.event.answer_id)
        task = outcome.task_type if outcome is not None else None
        hallucinated = verdicts[row.event.answer_id].judgement.hallucinated
        totals.answered += 1
        totals.hallucinated += hallucinated
        if task is None:
            continue
        counts = totals.by_task.setdefault(task, [0, 0])
        counts[0] += 1
        counts[1] += hallucinated
        part = by_task.setdefault(task, {"answers": 0, "flagged": 0, "gold_hallucinated": 0})
        part["answers"] += 1
        part["flagged"] += hallucinated
        part["gold_hallucinated"] += row.hallucinated
    offline_rate = totals.corrected(offline)
    lookup = _lookup(live)
    live_rate = totals.corrected(offline, lookup)
    for task, part in sorted(by_task.items()):
        alone = WindowTotals(
            answered=part["answers"],
            hallucinated=part["flagged"],
            by_task={task: [part["answers"], part["flagged"]]},
        )
        found = lookup(task)
        offline_counts = offline.for_task(task) if offline is not None else None
        part.update(
            true_rate=_rate(part["gold_hallucinated"], part["answers"]),
            raw_rate=_rate(part["flagged"], part["answers"]),
            offline_counts=None if offline_counts is None else _counts(offline_counts),
            live_counts=None if found is None else _counts(found.counts),
            labelled_answers=0 if found is None else found.labelled_answers,
            corrected_offline=_corrected(alone.corrected(offline)),
            corrected_live=_corrected(alone.corrected(offline, lookup)),
        )
    gold = sum(r.hallucinated for r in answered)
    interval = (
        [live_rate.low, live_rate.high]
        if live_rate is not None and live_rate.low is not None
        else None
    )
    return {
        "answers": len(rows),
        "answered": len(answered),
        "abstained": sum(
            1
            for r in rows
            if r.event.answer_id in verdicts and verdicts[r.event.answer_id].judgement.abstained
        ),
        "true_rate": _rate(gold, len(answered)),
        "raw_rate": _rate(flagged, len(answered)),
        "corrected_offline": None if offline_rate is None else offline_rate.estimate,
        "corrected_offline_interval": None
        if offline_rate is None or offline_rate.low is None
        else [offline_rate.low, offline_rate.high],
        "corrected_live": None if live_rate is None else live_rate.estimate,
        "corrected_live_interval": interval,
        "corrected_live_source": None if live_rate is None else live_rate.source,
        "corrected_live_identifiable": None if live_rate is None else live_rate.identifiable,
        "corrected_offline_identifiable": None
        if offline_rate is None
        else offline_rate.identifiable,
        "labels_used": 0 if live_rate is None else live_rate.labels_used,
        "offline_corrected_rate": _corrected(offline_rate),
        "live_corrected_rate": _corrected(live_rate),
        "by_task_type": by_task,
        "row_task_types": _tally(r.task_type for r in rows),
    }


def _lookup(live: LiveCorrection) -> LiveLookup:
    def lookup(task: str) -> LiveCounts | None:
        return live.live_counts(TENANT, ASSISTANT, task)

    return lookup


def _counts(counts: ConfusionCounts) -> dict[str, float]:
    return {k: round(float(getattr(counts, k)), 3) for k in ("tp", "fn", "tn", "fp")}


def _tally(values: Iterable[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return dict(sorted(found.items()))
