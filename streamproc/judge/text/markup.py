"""Inline citation marks in answer text: "[D07]", "[3]", "[D1, D2]"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import EvidenceItem

__all__ = ["CitationMark", "find_citations", "resolve_citation", "strip_citations"]

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,80})\](?!\()")  # "(...)" after it: a markdown link
_CITATION_LABEL = re.compile(r"[A-Za-z]{0,10}[-_ ]?\d[\w.-]*")
# Spaces before punctuation. Tried only where a run of spaces starts: tried at every
# space, a long run not followed by punctuation is rescanned from each of its spaces.
_SPACE_BEFORE_PUNCT = re.compile(r"(?<!\s)\s+([.!?,;:])")


@dataclass(frozen=True, slots=True)
class CitationMark:
    """One bracket group of citation labels and where it sits in the text."""

    start: int
    end: int
    labels: tuple[str, ...]


def find_citations(text: str, evidence_ids: frozenset[str]) -> list[CitationMark]:
    """Bracket groups whose every label has a digit or names an evidence item."""
    found = []
    for match in _BRACKETS.finditer(text):
        labels = tuple(label.strip() for label in re.split(r"[,;]", match.group(1)))
        if labels and all(
            label in evidence_ids or _CITATION_LABEL.fullmatch(label) for label in labels
        ):
            found.append(CitationMark(match.start(), match.end(), labels))
    return found


def resolve_citation(label: str, evidence: Sequence[EvidenceItem]) -> str | None:
    """ "D07" -> the item with that id; "3" -> id "3" if there is one, else the 3rd item."""
    for item in evidence:
        if item.id == label:
            return item.id
    for item in evidence:
        if item.id.lower() == label.lower():
            return item.id
    if label.isdecimal() and 1 <= int(label) <= len(evidence):
        return evidence[int(label) - 1].id
    return None


def strip_citations(text: str, evidence_ids: frozenset[str] = frozenset()) -> str:
    """Claim text without its citations, spaces before punctuation closed (as the course)."""
    pieces, last = [], 0
    for citation in find_citations(text, evidence_ids):
        pieces.append(text[last : citation.start])
        last = citation.end
    pieces.append(text[last:])
    return _SPACE_BEFORE_PUNCT.sub(r"\1", "".join(pieces)).strip()
