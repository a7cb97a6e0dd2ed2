"""The verifier's training pair and the text helpers every source of pairs shares.

Kept apart so that how premises are cut (the judge's own units, ``build_units``) changes
in one place for every source, perturbation and composed premise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.text.evidence import EvidenceUnit, build_units
from streamproc.judge.text.features import content_words
from streamproc.judge.text.sentences import split_sentences

__all__ = [
    "Pair",
    "best_unit",
    "evidence_sentences",
    "judge_units",
    "read_jsonl",
    "unit_texts",
    "word_coverage",
]


@dataclass(frozen=True, slots=True)
class Pair:
    premise: str
    hypothesis: str
    label: int
    kind: str
    group: str


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def judge_units(question: str | None, texts: Sequence[str], record: bool) -> list[EvidenceUnit]:
    """Sentence and window units as the judge builds them, as unit objects."""
    kind = EvidenceKind.RECORD if record else EvidenceKind.PASSAGE
    items = [EvidenceItem(id=f"P{i}", text=t, kind=kind) for i, t in enumerate(texts, 1)]
    return build_units(question, items)


def unit_texts(question: str | None, texts: Sequence[str], record: bool) -> list[str]:
    """Sentence and window units as the judge builds them (question unit dropped)."""
    return [u.text for u in judge_units(question, texts, record) if u.evidence_id != "question"]


def evidence_sentences(units: Sequence[str], texts: Sequence[str], record: bool) -> list[str]:
    """Single sentences (or record lines) of the evidence, for perturbation."""
    if record:
        kind = EvidenceKind.RECORD
        items = [EvidenceItem(id=f"P{i}", text=t, kind=kind) for i, t in enumerate(texts, 1)]
        return [u.text for u in build_units(None, items, window_sentences=1)]
    return [t[s:e].strip() for t in texts for s, e in split_sentences(t)]


def best_unit(hypothesis: str, units: Sequence[str]) -> str | None:
    """The unit covering most of the hypothesis's content words (ties: the shorter)."""
    words = content_words(hypothesis)
    if not words or not units:
        return None
    return max(units, key=lambda u: (len(words & content_words(u)) / len(words), -len(u)))


def word_coverage(hypothesis: str, premise: str) -> float:
    """Share of the hypothesis's content words the premise also has (1.0 for none)."""
    words = content_words(hypothesis)
    return len(words & content_words(premise)) / len(words) if words else 1.0
