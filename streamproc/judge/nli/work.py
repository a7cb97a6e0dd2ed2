"""What the NLI judge carries for each answer and claim between its stages (claims and
record checks, retrieval, NLI rounds, deciding), and the pairs those ask the model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streamproc.contracts.events import AnswerEvent, ClaimClass
from streamproc.judge.deadline import Deadline
from streamproc.judge.decision.calibrator import regime
from streamproc.judge.limits import CappedShape
from streamproc.judge.nli.premises import ComposedPremise
from streamproc.judge.nli.retrieval import Candidate
from streamproc.judge.rules.citations import citation_subsets
from streamproc.judge.rules.confidence import SentenceConfidence
from streamproc.judge.rules.settle import EvidenceFacts, Prechecks, Settled
from streamproc.judge.text.claims import AnswerClaim, Decomposition
from streamproc.judge.text.document_claims import about_document
from streamproc.judge.text.evidence import EvidenceUnit

__all__ = ["AnswerWork", "ClaimWork", "cited_units", "hypothesis", "needs_evidence", "pairs"]


@dataclass(slots=True)
class ClaimWork:
    """One claim on its way through the judge."""

    claim: AnswerClaim
    confidence: SentenceConfidence | None = None
    settled: Settled | None = None
    prechecks: Prechecks | None = None
    candidates: list[Candidate] = field(default_factory=list)
    cited: dict[tuple[str, ...], list[Candidate]] = field(default_factory=dict)
    asked: int | None = None  # candidates asked so far when deciding early; None: all
    composed: ComposedPremise | None = None  # asked when no single unit entails it

    @property
    def scored_candidates(self) -> list[Candidate]:
        """The candidates NLI scores: in rank order, up to the first that decided it."""
        return self.candidates if self.asked is None else self.candidates[: self.asked]


@dataclass(slots=True)
class AnswerWork:
    """One answer on its way through the judge: its evidence units and its claims."""

    answer: AnswerEvent
    capped: CappedShape
    clock: Deadline
    units: list[EvidenceUnit]
    facts: EvidenceFacts
    evidence_words: frozenset[str]
    claims: list[ClaimWork]
    shortlist: list[int] | None = None
    checked_claims: int = 0
    structured_evidence: bool = False
    case_evidence: bool = False
    limits: tuple[str, ...] = ()

    @property
    def regime(self) -> str:
        """``case``, ``record``, ``question`` or ``task`` (:func:`regime`), as the claims'
        signals say it."""
        return regime(self.structured_evidence, bool(self.answer.question), self.case_evidence)

    @property
    def shape(self) -> Decomposition:
        """The claims to judge (those the caps left out are in ``capped.left_out``)."""
        return self.capped.shape

    def hypothesis(self, claim: AnswerClaim) -> str:
        """What NLI and retrieval read for ``claim`` (see :func:`hypothesis`)."""
        if claim.claim_class is ClaimClass.DOCUMENT:
            reported = about_document(claim.text)
            if reported is not None and reported.kind == "report":
                return reported.content  # "the author argues that Y" is read as Y
        return hypothesis(self.answer.question, claim.text)


def pairs(works: Iterable[AnswerWork]) -> Iterable[tuple[str, str]]:
    """Every (premise, hypothesis) the batch needs: retrieved units and cited units."""
    for work in works:
        for item in work.claims:
            read_as = work.hypothesis(item.claim)
            for candidate in item.scored_candidates:
                yield work.units[candidate.unit].text, read_as
            for cited in item.cited.values():
                for candidate in cited:
                    yield work.units[candidate.unit].text, read_as
            if item.composed is not None:
                yield item.composed.text, read_as


def cited_units(work: AnswerWork) -> list[int]:
    """Units of evidence some claim cites: citation checks rank within them."""
    cited = {
        e
        for c in work.claims
        if needs_evidence(c)
        for s in citation_subsets(c.claim.resolved)
        for e in s
    }
    return [i for i, u in enumerate(work.units) if u.evidence_id in cited]


_FRAGMENT_WORDS = 8
_BARE_WORDS = 3


def _is_fragment(claim: str) -> bool:
    """A bare answer ("1932", "Swoosie Kurtz", "Yes.") rather than a sentence."""
    words = len(claim.split())
    ends_sentence = claim.rstrip().endswith((".", "!", "?"))
    return words <= _BARE_WORDS or (words <= _FRAGMENT_WORDS and not ends_sentence)


def hypothesis(question: str | None, claim: str) -> str:
    """A short answer to a question ("1932", "Swoosie Kurtz") asserts nothing on its own:
    NLI and retrieval read it after the question, so "When was the film released? 1932"
    can be entailed or not. Sentences are read as written."""
    if not question or not _is_fragment(claim):
        return claim
    return f"{question.strip()} {claim}"


def needs_evidence(item: ClaimWork) -> bool:
    """Checked claims the model must see: unsettled ones, or ones with citations."""
    return item.claim.checked and (item.settled is None or bool(item.claim.resolved))
