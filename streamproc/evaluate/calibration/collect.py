"""Run the judge over labelled answers and keep, per checked claim, its signals and labels.

The judge runs with the name and number rules soft and no calibrator, exactly as it
computes signals in production, so the calibrator is trained on the inputs it will see.
Rows are plain dicts (JSON lines), so a slow collection runs once and fitting reruns
from the cache in seconds.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from streamproc.contracts.events import AnswerJudgement, ClaimVerdict, JudgeInfo, VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.evaluate.benchmark import BenchmarkItem, judge_items
from streamproc.evaluate.cases import person_verdicts
from streamproc.judge.decision.calibrator import REGIMES, regime_of
from streamproc.judge.protocols import Judge
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.records.structured import ValueReason

__all__ = ["HARD_REASONS", "claim_rows", "collect", "read_rows", "write_rows"]

HARD_REASONS: frozenset[str] = frozenset(
    {
        ValueReason.VALUE_MISMATCH.value,
        *(r.value for r in RecordReason if r is not RecordReason.RECORD_CONFIRMED),
        "LOW_CONFIDENCE_SENTENCE",
        "SHAKY_SPECIFIC",  # a guessed specific is cut; "SHAKY_SPECIFIC_CONFIRMED" is not
        "TOPIC_NOT_IN_EVIDENCE",
        "COMPARISON_CONTRADICTED",
    }
)
"""Reason codes of findings that settle a claim whatever the calibrator says."""

NEGATION_FLIP = "NEGATION_FLIP"
"""Settles a claim only in the regimes where the judge treats it as hard."""

SETTLED_SUPPORTED: frozenset[str] = frozenset({"ABOUT_DOCUMENT", "COMPARISON_CONFIRMED"})
"""A sentence about the document whose topic check passed, a pick between two dated
things the years confirm: settled without the model, so their signals say nothing a
calibrator should learn from."""


def _hard(
    reasons: Sequence[Reason], signals: Mapping[str, float], hard_negation: Collection[str]
) -> bool:
    if any(r.code in HARD_REASONS for r in reasons):
        return True
    flipped = any(r.code == NEGATION_FLIP for r in reasons)
    return flipped and regime_of(signals) in hard_negation


def _settled_supported(claim: ClaimVerdict) -> bool:
    return claim.verdict is VerdictLabel.SUPPORTED and any(
        r.code in SETTLED_SUPPORTED for r in claim.reasons
    )


def hard_negation_regimes(info: JudgeInfo) -> frozenset[str]:
    """The regimes where ``info``'s judge lets a negation flip settle a claim (its
    ``hard_negation_<regime>`` thresholds; a judge that does not say: all of them)."""
    return frozenset(r for r in REGIMES if info.thresholds.get(f"hard_negation_{r}", 1.0) > 0)


def claim_rows(
    item: BenchmarkItem, judgement: AnswerJudgement, hard_negation: Collection[str]
) -> Iterable[dict[str, Any]]:
    """One row per checked claim; ``claim_label`` only where people labelled spans."""
    person = person_verdicts(item.case, judgement)[0] if item.span_labelled else None
    for position, claim in enumerate(judgement.claims):
        if claim.verdict in (None, VerdictLabel.UNVERIFIED) or _settled_supported(claim):
            continue
        label = person[position] if person is not None else None
        yield {
            "row_id": item.row_id,
            "dataset": item.dataset,
            "task": item.task_type,
            "answer_label": item.label,
            "claim_label": None if label is None else label is not VerdictLabel.SUPPORTED,
            "hard": claim.verdict is not VerdictLabel.SUPPORTED
            and _hard(claim.reasons, claim.signals, hard_negation),
            "claim": claim.text,
            "signals": claim.signals,
        }


def collect(
    items: Sequence[BenchmarkItem], judge: Judge, batch_size: int, progress: TextIO | None
) -> list[dict[str, Any]]:
    judgements, _ = judge_items(items, judge, batch_size, progress)
    hard = hard_negation_regimes(judge.info)
    return [row for i, j in zip(items, judgements, strict=True) for row in claim_rows(i, j, hard)]


def write_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
