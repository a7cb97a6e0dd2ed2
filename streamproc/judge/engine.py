"""ClaimJudge: the ``Judge`` for any ``ClaimChecker``, with one checker call per batch.

Decompose every answer of the batch, collect *all* claim/premise pairs (groundedness
against the question plus all evidence; citation checks against the question plus
cited subsets), deduplicate, ask the checker once, then assemble the judgements. That
single call is the micro-batching seam a model-based checker needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from streamproc.events import (
    AnswerEvent,
    AnswerJudgement,
    ClaimVerdict,
    EvidenceItem,
    JudgeInfo,
    VerdictLabel,
)
from streamproc.judge._protocols import ClaimChecker, PremiseCheck
from streamproc.judge.citations import assess_citations, citation_subsets
from streamproc.judge.claims import Claim, Decomposition, Granularity, decompose
from streamproc.judge.decide import decide

__all__ = [
    "ClaimJudge",
    "ExplainsVerdicts",
    "citation_reasons",
    "premise",
    "unchecked_verdict",
]


@runtime_checkable
class ExplainsVerdicts(Protocol):
    """Optional for a checker: reason codes for one pair, so auditors see *why*."""

    def explain(self, pair: PremiseCheck) -> list[str]: ...


def premise(question: str | None, evidence: Sequence[EvidenceItem]) -> str:
    """The text a claim is checked against. The question counts as evidence: a claim may
    repeat what the user said ("At 1.5 percent, ..."). Same shape as the course."""
    notes = " ".join(item.text for item in evidence)
    return f"Question: {question}\n{notes}" if question else notes


@dataclass(slots=True)
class _Plan:
    """One answer's claims and the premise of every check they need: groundedness
    against ``grounding``, citations against the premise of each cited subset."""

    answer: AnswerEvent
    shape: Decomposition
    grounding: str
    by_subset: dict[tuple[str, ...], str] = field(default_factory=dict)

    def pairs(self) -> list[PremiseCheck]:
        out = []
        for claim in self.shape.claims:
            if claim.checked:
                out.append(PremiseCheck(claim.text, self.grounding))
                subsets = citation_subsets(claim.resolved)
                out += [PremiseCheck(claim.text, self.by_subset[s]) for s in subsets]
        return out


class ClaimJudge:
    """Judges answers claim by claim with ``checker``. Stateless between calls."""

    def __init__(
        self,
        checker: ClaimChecker,
        *,
        granularity: Granularity = "atomic",
        version: str = "1",
        thresholds: Mapping[str, float] | None = None,
    ) -> None:
        self._checker = checker
        self._granularity: Granularity = granularity
        self._info = JudgeInfo(
            name=checker.name,
            version=version,
            granularity=granularity,
            thresholds=dict(thresholds or {}),
        )

    @property
    def info(self) -> JudgeInfo:
        """Name, version, granularity and thresholds, for the audit trail."""
        return self._info

    def judge_batch(self, answers: Sequence[AnswerEvent]) -> list[AnswerJudgement]:
        """One judgement per answer, in order; the checker is called once for the batch."""
        plans = [self._plan(answer) for answer in answers]
        pairs = list(dict.fromkeys(pair for plan in plans for pair in plan.pairs()))
        results = self._checker.check(pairs) if pairs else []
        if len(results) != len(pairs):
            raise ValueError(
                f"checker {self._checker.name!r} returned {len(results)} results "
                f"for {len(pairs)} pairs"
            )
        lookup = dict(zip(pairs, results, strict=True))
        return [self._assemble(plan, lookup) for plan in plans]

    def _plan(self, answer: AnswerEvent) -> _Plan:
        # Odd content (empty, only citations, unknown ids) is judged, never raised. A bug
        # does raise: the stream layer then re-judges one by one and dead-letters the
        # answer - visible, where judging it as "no claims" would silently pass it.
        shape = decompose(answer.answer, answer.evidence, self._granularity)
        by_id = {item.id: item for item in answer.evidence}
        plan = _Plan(answer, shape, grounding=premise(answer.question, answer.evidence))
        for claim in shape.claims:
            for subset in citation_subsets(claim.resolved):
                if subset not in plan.by_subset:
                    items = [by_id[i] for i in subset]
                    plan.by_subset[subset] = premise(answer.question, items)
        return plan

    def _assemble(
        self, plan: _Plan, lookup: Mapping[PremiseCheck, tuple[VerdictLabel, float]]
    ) -> AnswerJudgement:
        shape = plan.shape
        evidence_ids = [item.id for item in plan.answer.evidence]
        verdicts = []
        for claim in shape.claims:
            if not claim.checked:
                verdicts.append(unchecked_verdict(claim))
                continue
            pair = PremiseCheck(claim.text, plan.grounding)
            verdict, score = lookup[pair]

            def supports(subset: tuple[str, ...], text: str = claim.text) -> bool:
                found = lookup[PremiseCheck(text, plan.by_subset[subset])]
                return found[0] is VerdictLabel.SUPPORTED

            cites = assess_citations(claim.resolved, shape.uses_citations, supports)
            reasons = self._explain(pair) if verdict is not VerdictLabel.SUPPORTED else []
            reasons += citation_reasons(claim, cites.supported)
            verdicts.append(
                unchecked_verdict(claim).model_copy(
                    update={
                        "verdict": verdict,
                        "score": score,
                        "reasons": reasons,
                        "evidence_ids": evidence_ids,
                        "citation_supported": cites.supported,
                        "citations_needed": list(cites.needed),
                    }
                )
            )
        return decide(
            verdicts,
            [s.text for s in shape.sentences],
            abstained=shape.abstained,
            answerable=plan.answer.answerable,
        )

    def _explain(self, pair: PremiseCheck) -> list[str]:
        if isinstance(self._checker, ExplainsVerdicts):
            return self._checker.explain(pair)
        return []


def _as_written(resolved: Sequence[str | None], labels: Sequence[str]) -> list[str]:
    """Citations as evidence ids ("[3]" -> "D03"); a label naming nothing stays as written."""
    return [r if r is not None else label for r, label in zip(resolved, labels, strict=True)]


def unchecked_verdict(claim: Claim) -> ClaimVerdict:
    """The verdict record of a claim before (or without) checking it."""
    return ClaimVerdict(
        index=claim.index,
        sentence_index=claim.sentence_index,
        text=claim.text,
        start=claim.start,
        end=claim.end,
        claim_class=claim.claim_class,
        citations=_as_written(claim.resolved, claim.citations),
    )


def citation_reasons(claim: Claim, supported: bool | None) -> list[str]:
    """Reason codes about a claim's citations (unknown ids, missing or not supporting)."""
    reasons = []
    if claim.unresolved:
        reasons.append(f"CITATION_UNKNOWN: {', '.join(claim.unresolved)}")
    if supported is False:
        reasons.append("CITATION_MISSING" if not claim.citations else "CITATION_NOT_SUPPORTING")
    return reasons
