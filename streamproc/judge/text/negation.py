"""Negation flips: the classic blind spot of word overlap ("can be billed" over "cannot be
billed" shares every content word). Cheap, and checked before trusting an entailment."""

from __future__ import annotations

import re

from streamproc.judge.text.features import content_words

__all__ = ["flips_negation", "is_negated"]

_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|without|cannot|can't|won't|isn't|aren't|wasn't|"
    r"weren't|doesn't|don't|didn't|hasn't|haven't|hadn't|shouldn't|wouldn't|couldn't|"
    r"mustn't|nothing|nobody)\b|n't\b",
    re.IGNORECASE,
)


def is_negated(text: str) -> bool:
    """Whether the text carries a negation word."""
    return _NEGATION.search(text) is not None


def flips_negation(claim: str, evidence: str, min_overlap: float = 0.6) -> bool:
    """True when claim and evidence talk about the same thing (most of the claim's content
    words appear in the evidence) but exactly one of them is negated."""
    words = content_words(claim)
    if not words:
        return False
    overlap = len(words & content_words(evidence)) / len(words)
    return overlap >= min_overlap and is_negated(claim) != is_negated(evidence)
