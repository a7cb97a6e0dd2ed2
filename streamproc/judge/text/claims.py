"""Decompose an answer into the claims a judge checks.

Sentences first (so decimals, abbreviations and ids do not end a sentence), then, at
``atomic`` granularity, a conservative split at semicolons and ", and" / ", but" ...
only where both halves assert something. Inline citations are pulled out of the claim
text but kept per claim; abstentions ("I can't find that in the notes") and
conversational lines ("Thanks for reaching out") are recognised, because neither is
something the evidence could support or refute.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streamproc.contracts.events import ClaimClass, EvidenceItem, EvidenceKind
from streamproc.judge.text.atomic import asserts, atomic_spans
from streamproc.judge.text.document_claims import about_document
from streamproc.judge.text.features import numbers
from streamproc.judge.text.markup import (
    CitationMark,
    find_citations,
    resolve_citation,
    strip_citations,
)
from streamproc.judge.text.sentences import split_sentences
from streamproc.judge.text.speech_acts import is_abstention, is_conversational

__all__ = [
    "AnswerClaim",
    "Decomposition",
    "Granularity",
    "Sentence",
    "asserts",
    "decompose",
    "is_abstention",
    "is_conversational",
    "split_sentences",
    "strip_citations",
]

Granularity = Literal["sentence", "atomic"]


@dataclass(frozen=True, slots=True)
class Sentence:
    """One answer sentence; ``start``/``end`` are offsets in the original answer."""

    index: int
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class AnswerClaim:
    """One claim to check (or, if conversational, to report and leave alone).

    ``citations`` are the labels as written ("D07", "3"); ``resolved`` the evidence id
    each one names, or None when it names none.
    """

    index: int
    sentence_index: int
    text: str
    start: int
    end: int
    claim_class: ClaimClass
    citations: tuple[str, ...] = ()
    resolved: tuple[str | None, ...] = ()

    @property
    def cited_ids(self) -> tuple[str, ...]:
        """The evidence ids cited, each once, in order."""
        return tuple(dict.fromkeys(r for r in self.resolved if r is not None))

    @property
    def unresolved(self) -> tuple[str, ...]:
        """Citation labels that name no evidence item."""
        return tuple(c for c, r in zip(self.citations, self.resolved, strict=True) if r is None)

    @property
    def checked(self) -> bool:
        """Conversational claims assert nothing and are not checked."""
        return self.claim_class is not ClaimClass.CONVERSATIONAL


@dataclass(frozen=True, slots=True)
class Decomposition:
    """Everything the judge needs to know about the shape of one answer."""

    sentences: tuple[Sentence, ...]
    claims: tuple[AnswerClaim, ...]
    abstained: bool
    uses_citations: bool


# ---------------------------------------------------------------------------- decompose


def _has_text(text: str) -> bool:
    return re.search(r"[^\W_]", text) is not None  # a letter or digit, not just "."


def _classify(text: str, has_records: bool, document_claims: bool = True) -> ClaimClass:
    """record: an id or amount checked against records; document: a sentence about the
    source ("the article discusses X"); rule: everything else asserted."""
    if is_conversational(text):
        return ClaimClass.CONVERSATIONAL
    if has_records and numbers(text):
        return ClaimClass.RECORD
    if document_claims and about_document(text) is not None:
        return ClaimClass.DOCUMENT
    return ClaimClass.RULE


def _part_labels(
    cites: Sequence[CitationMark], offset: int, part: tuple[int, int], last: tuple[int, int]
) -> tuple[str, ...]:
    """A part's own citations; a part without any takes the sentence-final ones
    ("A, and B [D07]." cites D07 for A too)."""

    starts = [c.start + offset for c in cites]  # in order: finditer's matches

    def within(span: tuple[int, int]) -> list[str]:
        first, stop = bisect_left(starts, span[0]), bisect_left(starts, span[1])
        return [label for c in cites[first:stop] for label in c.labels]

    return tuple(within(part) or within(last))


def decompose(
    answer: str,
    evidence: Sequence[EvidenceItem],
    granularity: Granularity = "sentence",
    *,
    document_claims: bool = True,
) -> Decomposition:
    """Split ``answer`` into sentences and claims, resolving citations against ``evidence``.
    ``document_claims=False`` reads sentences about the document as any other (to
    measure what recognising them buys)."""
    evidence_ids = frozenset(item.id for item in evidence)
    has_records = any(
        item.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT) for item in evidence
    )
    all_cites = find_citations(answer, evidence_ids)
    cite_starts = [c.start for c in all_cites]  # in order: a bisection per sentence
    sentences: list[Sentence] = []
    claims: list[AnswerClaim] = []
    abstained = False
    for sentence_start, sentence_end in split_sentences(answer):
        sentence = Sentence(
            len(sentences), sentence_start, sentence_end, answer[sentence_start:sentence_end]
        )
        sentences.append(sentence)
        first = bisect_left(cite_starts, sentence_start)
        stop = bisect_left(cite_starts, sentence_end)
        cites = [
            CitationMark(c.start - sentence_start, c.end - sentence_start, c.labels)
            for c in all_cites[first:stop]
        ]
        if granularity == "atomic":
            parts = atomic_spans(answer, sentence_start, sentence_end, cites)
        else:
            parts = [(sentence_start, sentence_end)]
        parts = [(s, e) for s, e in parts if _has_text(strip_citations(answer[s:e], evidence_ids))]
        kept = [(s, e) for s, e in parts if not is_abstention(answer[s:e])]
        abstained = abstained or len(kept) < len(parts)
        parts = kept
        for part_start, part_end in parts:
            labels = _part_labels(cites, sentence_start, (part_start, part_end), parts[-1])
            text = strip_citations(answer[part_start:part_end], evidence_ids)
            claims.append(
                AnswerClaim(
                    index=len(claims),
                    sentence_index=sentence.index,
                    text=text,
                    start=part_start,
                    end=part_end,
                    claim_class=_classify(text, has_records, document_claims),
                    citations=labels,
                    resolved=tuple(resolve_citation(label, evidence) for label in labels),
                )
            )
    return Decomposition(tuple(sentences), tuple(claims), abstained, bool(all_cites))
