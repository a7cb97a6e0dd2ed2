"""What one review item looks like on the page, as plain data for the templates.

The answer is cut into segments, each claim's own span coloured by its verdict. Each
evidence item is cut into its sentences, and the sentence that decided a claim is marked:
a claim's ``evidence_ids`` name the evidence that decided it, and within that evidence the
sentence sharing the most words with the claim is the one shown highlighted (the judge
keeps no sentence offsets in its verdict). Texts stay texts here: the templates escape
them, so hostile evidence cannot become markup.

The judge's verdicts anchor a reviewer who sees them before deciding, so a view is built
without them unless the page is told to show them (``show_judge``); without it, claims,
spans and highlighted sentences carry no verdict, score or reason at all, not merely hidden
ones.
When shown, a claim's reasons are plain phrases (:mod:`.reasons`), never the judge's
internals.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC

from streamproc.contracts.events import ClaimVerdict, EvidenceItem
from streamproc.contracts.label_events import ReviewItem
from streamproc.judge.text.sentences import split_sentences
from streamproc.review.page.reasons import plain_reasons

__all__ = [
    "ClaimView",
    "EvidenceView",
    "ItemView",
    "Segment",
    "deciding_sentence",
    "item_view",
]

UNCHECKED = "unchecked"
PLAIN = "plain"
"""The colour of a claim, span or sentence whose verdict the page does not show."""
_WORD = re.compile(r"\w+", re.UNICODE)
# Words that say nothing about which sentence a claim came from.
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is"}
    | {"it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will", "with"}
)


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of text; ``claims`` are the (1-based) numbers of the claims it belongs to
    (the answer) or that it decided (evidence), ``verdict`` how to colour it."""

    text: str
    claims: tuple[int, ...] = ()
    verdict: str | None = None

    @property
    def colour(self) -> str:
        return self.verdict or PLAIN


@dataclass(frozen=True, slots=True)
class ClaimView:
    """``verdict`` None, ``score`` None and no ``reasons`` when the judge is not shown;
    ``reasons`` are plain phrases."""

    index: int
    number: int
    text: str
    verdict: str | None
    claim_class: str
    score: float | None
    reasons: list[str]
    evidence_ids: list[str]

    @property
    def colour(self) -> str:
        return self.verdict or PLAIN


@dataclass(frozen=True, slots=True)
class EvidenceView:
    id: str
    kind: str
    source: str | None
    segments: list[Segment]
    fields_json: str | None
    decided: list[int] = field(default_factory=list)
    executed: bool | None = None


@dataclass(frozen=True, slots=True)
class ItemView:
    item: ReviewItem
    answer_segments: list[Segment]
    claims: list[ClaimView]
    evidence: list[EvidenceView]
    show_judge: bool = False

    @property
    def action(self) -> str:
        return self.item.judgement.action.value

    @property
    def occurred_utc(self) -> str:
        return self.item.occurred_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")

    @property
    def flagged(self) -> bool:
        return self.item.sampled_because.value == "flagged"


def _verdict(claim: ClaimVerdict) -> str:
    return claim.verdict.value if claim.verdict else UNCHECKED


def _words(text: str) -> set[str]:
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOPWORDS}


def deciding_sentence(claim: str, evidence: str) -> tuple[int, int] | None:
    """The span of the evidence sentence most similar to the claim (cosine of their word
    sets), or None when no sentence shares a word with it."""
    wanted = _words(claim)
    if not wanted:
        return None
    best: tuple[float, tuple[int, int]] | None = None
    for start, end in split_sentences(evidence):
        words = _words(evidence[start:end])
        shared = len(wanted & words)
        if not shared:
            continue
        score = shared / math.sqrt(len(wanted) * len(words))
        if best is None or score > best[0]:
            best = (score, (start, end))
    return None if best is None else best[1]


def _answer_segments(answer: str, claims: list[ClaimVerdict], show_judge: bool) -> list[Segment]:
    segments: list[Segment] = []
    cursor = 0
    for claim in sorted(claims, key=lambda c: (c.start, c.index)):
        end = min(claim.end, len(answer))
        if claim.start < cursor or claim.start >= end:
            continue  # overlapping or empty span: the claim is still listed below
        if claim.start > cursor:
            segments.append(Segment(answer[cursor : claim.start]))
        verdict = _verdict(claim) if show_judge else None
        segments.append(Segment(answer[claim.start : end], (claim.index + 1,), verdict))
        cursor = end
    if cursor < len(answer):
        segments.append(Segment(answer[cursor:]))
    return segments


def _evidence_view(
    item: EvidenceItem, claims: list[ClaimVerdict], show_judge: bool
) -> EvidenceView:
    marks: dict[tuple[int, int], list[ClaimVerdict]] = {}
    decided = []
    for claim in claims:
        if item.id not in claim.evidence_ids:
            continue
        decided.append(claim.index + 1)
        span = deciding_sentence(claim.text, item.text)
        if span is not None:
            marks.setdefault(span, []).append(claim)
    segments: list[Segment] = []
    cursor = 0
    for (start, end), deciders in sorted(marks.items()):
        if start < cursor:
            continue
        if start > cursor:
            segments.append(Segment(item.text[cursor:start]))
        # The sentence takes the colour of the worst verdict it decided.
        verdicts = {_verdict(c) for c in deciders}
        colour = next(
            v for v in ("contradicted", "unsupported", "supported", UNCHECKED) if v in verdicts
        )
        numbers = tuple(c.index + 1 for c in deciders)
        segments.append(Segment(item.text[start:end], numbers, colour if show_judge else None))
        cursor = end
    if cursor < len(item.text):
        segments.append(Segment(item.text[cursor:]))
    fields = (
        json.dumps(item.fields, ensure_ascii=False, indent=2, sort_keys=True)
        if item.fields
        else None
    )
    return EvidenceView(
        id=item.id,
        kind=item.kind.value,
        source=item.source,
        segments=segments,
        fields_json=fields,
        decided=decided,
        executed=item.executed,
    )


def item_view(item: ReviewItem, *, show_judge: bool = False) -> ItemView:
    """The page's view of ``item``; the judge's verdicts only with ``show_judge``."""
    claims = list(item.judgement.claims)
    return ItemView(
        item=item,
        answer_segments=_answer_segments(item.answer, claims, show_judge),
        claims=[
            ClaimView(
                index=c.index,
                number=c.index + 1,
                text=c.text,
                verdict=_verdict(c) if show_judge else None,
                claim_class=c.claim_class.value,
                score=c.score if show_judge else None,
                reasons=plain_reasons(c.reasons) if show_judge else [],
                evidence_ids=list(c.evidence_ids),
            )
            for c in claims
        ],
        evidence=[_evidence_view(e, claims, show_judge) for e in item.evidence],
        show_judge=show_judge,
    )
