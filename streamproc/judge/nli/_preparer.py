"""Levels 1 and 2a of the NLI judge, with no model: an answer's claims (within the work
caps), its evidence units, and per checked claim its token confidence and the record,
value and name checks that may settle it before retrieval (:mod:`.work` carries the
result on)."""

from __future__ import annotations

from dataclasses import dataclass

from streamproc.contracts.events import AnswerEvent
from streamproc.judge.deadline import Deadline
from streamproc.judge.limits import JudgeLimits, cap_units, decompose_within
from streamproc.judge.nli.units import statements_only
from streamproc.judge.nli.work import AnswerWork, ClaimWork
from streamproc.judge.records.case_check import CaseChecker
from streamproc.judge.records.confirmation import confirmed_values
from streamproc.judge.records.record_values import ZeroLengthHours
from streamproc.judge.records.structured import StructuredEvidence
from streamproc.judge.rules.confidence import (
    ConfidenceThresholds,
    SentenceConfidence,
    sentence_confidence,
)
from streamproc.judge.rules.settle import EvidenceFacts, precheck
from streamproc.judge.text.claims import AnswerClaim, Granularity
from streamproc.judge.text.evidence import build_units, is_structured
from streamproc.judge.text.features import content_words, numbers
from streamproc.judge.text.name_forms import fold

__all__ = ["AnswerPreparer"]


@dataclass(frozen=True, slots=True)
class AnswerPreparer:
    """What the NLI judge reads before any model call, as its options set it."""

    records: CaseChecker
    granularity: Granularity
    limits: JudgeLimits
    document_claims: bool
    window: int
    zero_length_hours: ZeroLengthHours
    confidence: ConfidenceThresholds
    confidence_by_model: dict[str, ConfidenceThresholds]
    soft_rules: bool

    def prepare(self, answer: AnswerEvent, clock: Deadline) -> AnswerWork:
        capped = decompose_within(
            answer.answer,
            answer.evidence,
            self.granularity,
            self.limits,
            document_claims=self.document_claims,
        )
        clock.check()
        every_unit = build_units(answer.question, answer.evidence, self.window)
        kept = cap_units(every_unit, self.limits)
        units = statements_only(kept.units)  # what retrieval and NLI may see
        # The presence checks (is this number, this name anywhere in the evidence?) are
        # linear and read it all: a figure stated only beyond the unit cap must read as
        # "not entailed by what we read", never as "not in the evidence" (contradicted).
        all_text = " ".join(u.text for u in every_unit)
        clock.check()
        cases = self.records.for_answer(answer)
        case_regime = cases.case_evidence
        facts = EvidenceFacts(
            names_text=fold(all_text),
            numbers=frozenset().union(*(numbers(u.text) for u in every_unit)),
            words=content_words(all_text),
            structured=StructuredEvidence.from_items(answer.evidence, self.zero_length_hours)
            if not case_regime
            else StructuredEvidence(()),
            word_count=len(all_text.split()),
        )
        clock.check()
        claims = []
        for claim in capped.shape.claims:
            work = ClaimWork(claim)
            if claim.checked:
                thresholds = self.confidence_by_model.get(answer.model, self.confidence)
                work.confidence = _confidence(answer, claim, thresholds)
                work.prechecks = precheck(
                    answer,
                    claim,
                    work.confidence,
                    facts,
                    soft_rules=self.soft_rules,
                    case=cases.check(claim.text),
                    case_regime=case_regime,
                )
                work.settled = work.prechecks.hard
            claims.append(work)
            clock.check()
        return AnswerWork(
            answer,
            capped,
            clock,
            units,
            facts,
            facts.words,
            claims,
            checked_claims=sum(c.claim.checked for c in claims),
            structured_evidence=not facts.structured.empty
            or any(is_structured(e) for e in answer.evidence),
            case_evidence=case_regime,
            limits=capped.limits + kept.limits + cases.limits(),
        )


def _confidence(
    answer: AnswerEvent, claim: AnswerClaim, thresholds: ConfidenceThresholds
) -> SentenceConfidence | None:
    if not answer.tokens:
        return None
    confirmed = confirmed_values(claim.text, answer.evidence)
    return sentence_confidence(
        answer.tokens, claim.start, claim.end, thresholds, confirmed=confirmed
    )
