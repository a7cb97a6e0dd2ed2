"""The labelled case every loader produces, and how people's labels meet judged claims.

Two kinds of labels exist: one verdict per sentence claim (the course lab) and
hallucinated character spans (RAGTruth). Both become one person-verdict per judged
claim, so ``agree`` and ``score`` never care where the labels came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    ClaimVerdict,
    LabelledSpan,
    VerdictLabel,
)

__all__ = ["CaseResult", "LabelMismatch", "LabelledCase", "person_verdicts"]


class LabelMismatch(ValueError):
    """Claim labels that do not line up with the answer's claims: fix the data, not the judge."""


@dataclass(frozen=True, slots=True)
class LabelledCase:
    """One answer to evaluate; ``origin`` says where it was read (file:line) for errors."""

    event: AnswerEvent
    origin: str

    @property
    def case_id(self) -> str:
        return self.event.answer_id

    @property
    def claim_labels(self) -> list[VerdictLabel] | None:
        """One verdict per sentence claim, when a person labelled claims."""
        return self.event.labels.claims if self.event.labels else None

    @property
    def spans(self) -> list[LabelledSpan] | None:
        return self.event.labels.spans if self.event.labels else None

    @property
    def sentence_labelled(self) -> bool:
        """Claim-verdict labels were made per sentence: such cases are judged per sentence."""
        return self.claim_labels is not None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A judged case. ``person`` has one entry per judged claim: the person's verdict, or
    None where the claim is not checked or nobody labelled it."""

    case: LabelledCase
    judgement: AnswerJudgement
    person: tuple[VerdictLabel | None, ...]
    uncovered_spans: int = 0

    @property
    def person_hallucinated(self) -> bool | None:
        """The person's answer-level call: the response label, else any claim not supported."""
        labels = self.case.event.labels
        if labels and labels.response:
            return labels.response == "hallucinated"
        known = [p for p in self.person if p is not None]
        if not known:
            return None
        return any(p is not VerdictLabel.SUPPORTED for p in known)


def _overlaps(claim: ClaimVerdict, span: LabelledSpan) -> bool:
    return span.start < claim.end and claim.start < span.end


def _span_verdict(spans: Sequence[LabelledSpan]) -> VerdictLabel:
    """Contradicted beats unsupported; a plain "hallucinated" span counts as unsupported."""
    if any(s.verdict == "contradicted" for s in spans):
        return VerdictLabel.CONTRADICTED
    return VerdictLabel.UNSUPPORTED


def person_verdicts(
    case: LabelledCase, judgement: AnswerJudgement
) -> tuple[tuple[VerdictLabel | None, ...], int]:
    """The person's verdict per judged claim, and how many labelled spans no checked claim
    covers (labels the judge never had a chance to agree with)."""
    claims = judgement.claims
    checked = [c for c in claims if c.verdict is not None]
    if case.claim_labels is not None:
        if len(case.claim_labels) != len(checked):
            raise LabelMismatch(
                f"{case.case_id} ({case.origin}): the answer has {len(checked)} claims "
                f"but {len(case.claim_labels)} labels"
            )
        by_index = {c.index: label for c, label in zip(checked, case.claim_labels, strict=True)}
        return tuple(by_index.get(c.index) for c in claims), 0
    spans = case.spans
    labels = case.event.labels
    if spans is None:
        faithful = labels is not None and labels.response == "faithful"
        return tuple(
            VerdictLabel.SUPPORTED if faithful and c.verdict is not None else None for c in claims
        ), 0
    out: list[VerdictLabel | None] = []
    for claim in claims:
        if claim.verdict is None:
            out.append(None)
            continue
        hits = [s for s in spans if _overlaps(claim, s)]
        out.append(_span_verdict(hits) if hits else VerdictLabel.SUPPORTED)
    uncovered = sum(not any(_overlaps(c, s) for c in checked) for s in spans)
    return tuple(out), uncovered
