"""Pick the few evidence units worth running NLI on, per claim.

NLI on the whole concatenated evidence raises false alarms and silently truncates long
evidence; NLI on every sentence costs claims x sentences. So each claim gets the top-k
units by a blend of embedding similarity and lexical overlap, plus every unit that
carries one of the claim's numbers or names - an exact figure must never be missed
because its sentence embeds a little further away.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamproc.judge.text.features import content_words, numbers

__all__ = ["Candidate", "lexical_coverage", "mentions_any", "names", "rank_candidates"]

_NAME = re.compile(r"\b[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)*")
_POSSESSIVE = re.compile(r"'s?$")
_LEXICAL_WEIGHT = 0.5
_EXACT_EXTRA = 2


@dataclass(frozen=True, slots=True)
class Candidate:
    """One evidence unit retrieved for a claim, with why it was picked."""

    unit: int
    similarity: float
    coverage: float
    exact: bool

    @property
    def rank_score(self) -> float:
        return self.similarity + _LEXICAL_WEIGHT * self.coverage


def names(text: str) -> frozenset[str]:
    """Capitalised words and runs ("Acme Corp", "Monday"), minus a sentence's first word,
    without a possessive ending: "Obama's" names Obama, and evidence that says "Obama"
    knows him."""
    found = set()
    for match in _NAME.finditer(text):
        name = match.group()
        if match.start() == 0 or text[match.start() - 2 : match.start()].strip() in {".", "!"}:
            rest = name.split(maxsplit=1)
            if len(rest) < 2:
                continue
            name = rest[1]
        found.add(_POSSESSIVE.sub("", name.lower()))
    return frozenset(found)


def lexical_coverage(claim_words: frozenset[str], unit_words: frozenset[str]) -> float:
    """Share of the claim's content words that the unit contains (1.0 for no words)."""
    if not claim_words:
        return 1.0
    return len(claim_words & unit_words) / len(claim_words)


def rank_candidates(
    claim: str,
    claim_vector: NDArray[np.float32],
    unit_texts: Sequence[str],
    unit_vectors: NDArray[np.float32],
    k: int,
    among: Sequence[int] | None = None,
) -> list[Candidate]:
    """The best ``k`` units for ``claim`` plus up to two more that match a number or
    name exactly. Vectors are unit-length rows, so the dot product is the cosine.
    ``among``: rank only the units at these indices (a shortlist, a cited subset)."""
    indices = list(range(len(unit_texts))) if among is None else list(among)
    if not indices:
        return []
    similarities = unit_vectors[indices] @ claim_vector
    claim_words = content_words(claim)
    specifics = numbers(claim) | names(claim)
    candidates = [
        Candidate(
            unit=index,
            similarity=float(similarity),
            coverage=lexical_coverage(claim_words, content_words(unit_texts[index])),
            exact=bool(specifics) and mentions_any(unit_texts[index], specifics),
        )
        for index, similarity in zip(indices, similarities, strict=True)
    ]
    ranked = sorted(candidates, key=lambda c: c.rank_score, reverse=True)
    chosen = ranked[:k]
    extra = [c for c in ranked[k:] if c.exact][:_EXACT_EXTRA]
    return chosen + extra


def mentions_any(text: str, specifics: frozenset[str]) -> bool:
    """The text contains one of the (lower-cased) numbers or names, as a substring."""
    lowered = text.lower()
    return any(item in lowered for item in specifics)
