"""ClaimJudge: the ``Judge`` for any ``ClaimChecker``, with one checker call per batch.

Decompose every answer of the batch, collect *all* claim/premise pairs (groundedness
against the question plus all evidence; citation checks against the question plus
cited subsets), deduplicate, ask the checker once, then assemble the judgements. That
single call is the micro-batching seam a model-based checker needs.

Each answer is decomposed and its evidence read within the work caps
(:mod:`streamproc.judge.limits`), and its own steps run against its deadline
(:mod:`streamproc.judge.deadline`); the shared checker call is bounded by the caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    ClaimVerdict,
    EvidenceItem,
    JudgeInfo,
    UnverifiedReason,
    VerdictLabel,
)
from streamproc.contracts.reasons import Reason
from streamproc.judge.deadline import Deadline
from streamproc.judge.decision.actions import decide
from streamproc.judge.limits import (
    CappedShape,
    JudgeLimits,
    cap_units,
    capped_evidence,
    decompose_within,
    unchecked_verdict,
    with_limits,
)
from streamproc.judge.protocols import ClaimChecker, PremiseCheck
from streamproc.judge.records.case_check import CaseCheck, CaseChecker
from streamproc.judge.rules.citations import assess_citations, citation_subsets
from streamproc.judge.stage_times import stage
from streamproc.judge.text.claims import AnswerClaim, Granularity
from streamproc.judge.text.evidence import build_units

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

    def explain(self, pair: PremiseCheck) -> list[Reason]: ...


def premise(question: str | None, evidence: Sequence[EvidenceItem]) -> str:
    """The text a claim is checked against. The question counts as evidence: a claim may
    repeat what the user said ("At 1.5 percent, ..."). Same shape as the course."""
    notes = " ".join(item.text for item in evidence)
    return f"Question: {question}\n{notes}" if question else notes


@dataclass(slots=True)
class _Plan:
    """One answer's claims and the premise of every check they need: groundedness
    against ``grounding``, citations against the premise of each cited subset; and what
    the records settled (claim index -> the record check)."""

    answer: AnswerEvent
    capped: CappedShape
    clock: Deadline
    grounding: str
    by_subset: dict[tuple[str, ...], str] = field(default_factory=dict)
    limits: tuple[str, ...] = ()
    records: dict[int, CaseCheck] = field(default_factory=dict)

    def pairs(self) -> list[PremiseCheck]:
        out = []
        for claim in self.capped.shape.claims:
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
        limits: JudgeLimits | None = None,
        records: CaseChecker | None = None,
    ) -> None:
        self._checker = checker
        self._granularity: Granularity = granularity
        self._limits = limits or JudgeLimits()
        self._records = records or CaseChecker()
        self._info = JudgeInfo(
            name=checker.name,
            version=version,
            granularity=granularity,
            thresholds=dict(thresholds or {}),
            options=self._records.describe(),
        )

    @property
    def info(self) -> JudgeInfo:
        """Name, version, granularity and thresholds, for the audit trail."""
        return self._info

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        """One judgement per answer, in order; the checker is called once for the batch.

        ``deadline_s``: each answer's own steps (not the shared checker call) may take
        this long, else :class:`~streamproc.judge.deadline.AnswerTimedOut` names it.
        """
        plans = []
        with stage("claims"):
            for index, answer in enumerate(answers):
                clock = Deadline(deadline_s).start(index)
                plans.append(self._plan(answer, clock))
                clock.pause()
        pairs = list(dict.fromkeys(pair for plan in plans for pair in plan.pairs()))
        with stage("check"):  # the checker, once for the batch
            results = self._checker.check(pairs) if pairs else []
        if len(results) != len(pairs):
            raise ValueError(
                f"checker {self._checker.name!r} returned {len(results)} results "
                f"for {len(pairs)} pairs"
            )
        lookup = dict(zip(pairs, results, strict=True))
        with stage("decide"):
            return [self._assemble(plan, lookup) for plan in plans]

    def settle_batch(
        self, answers: Sequence[AnswerEvent], *, reason: UnverifiedReason
    ) -> list[AnswerJudgement]:
        """``SettlesCheaply``: a checker with no model behind it (the rules) is all cheap
        checks, so settling is judging and nothing is left ``unverified`` (``reason`` is
        unused). A model-backed checker would need its own cheap path."""
        del reason
        return self.judge_batch(answers)

    def _plan(self, answer: AnswerEvent, clock: Deadline) -> _Plan:
        # Odd content (empty, only citations, unknown ids) is judged, never raised. A bug
        # does raise: the stream layer then re-judges one by one and dead-letters the
        # answer - visible, where judging it as "no claims" would silently pass it.
        capped = decompose_within(answer.answer, answer.evidence, self._granularity, self._limits)
        clock.check()
        # The checker reads whole items; over the unit caps it reads the kept units only.
        units = cap_units(build_units(answer.question, answer.evidence, 1), self._limits)
        clock.check()
        question, evidence = answer.question, list(answer.evidence)
        if units.limits:
            question, evidence = capped_evidence(answer.question, answer.evidence, units)
        by_id = {item.id: item for item in evidence}
        plan = _Plan(answer, capped, clock, premise(question, evidence))
        cases = self._records.for_answer(answer)
        for claim in capped.shape.claims:
            for subset in citation_subsets(claim.resolved):
                if subset not in plan.by_subset:
                    items = [by_id[i] for i in subset]
                    plan.by_subset[subset] = premise(question, items)
            if claim.checked:
                plan.records[claim.index] = cases.check(claim.text)
            clock.check()
        plan.limits = capped.limits + units.limits + cases.limits()
        return plan

    def _assemble(
        self, plan: _Plan, lookup: Mapping[PremiseCheck, tuple[VerdictLabel, float]]
    ) -> AnswerJudgement:
        with plan.clock.running() as clock:
            clock.check()
            shape = plan.capped.shape
            evidence_ids = [item.id for item in plan.answer.evidence]
            verdicts = []
            for claim in shape.claims:
                clock.check()
                if not claim.checked:
                    verdicts.append(unchecked_verdict(claim))
                    continue
                verdicts.append(self._claim_verdict(claim, plan, lookup, evidence_ids))
            judgement = decide(
                plan.capped.verdicts(verdicts),
                [s.text for s in shape.sentences],
                abstained=shape.abstained,
                answerable=plan.answer.answerable,
            )
            clock.check()
            return with_limits(judgement, plan.limits)

    def _claim_verdict(
        self,
        claim: AnswerClaim,
        plan: _Plan,
        lookup: Mapping[PremiseCheck, tuple[VerdictLabel, float]],
        evidence_ids: list[str],
    ) -> ClaimVerdict:
        pair = PremiseCheck(claim.text, plan.grounding)
        verdict, score = lookup[pair]
        case = plan.records.get(claim.index)
        if case is not None and case.hard and case.finding is not None:  # records decide
            finding = case.finding
            verdict, score = finding.verdict or verdict, 0.0
            return unchecked_verdict(claim).model_copy(
                update={
                    "verdict": verdict,
                    "score": score,
                    "reasons": [finding.reason_text, *case.notes],
                    "evidence_ids": [finding.evidence_id] if finding.evidence_id else evidence_ids,
                }
            )

        def supports(subset: tuple[str, ...]) -> bool:
            found = lookup[PremiseCheck(claim.text, plan.by_subset[subset])]
            return found[0] is VerdictLabel.SUPPORTED

        cites = assess_citations(claim.resolved, plan.capped.shape.uses_citations, supports)
        reasons = self._explain(pair) if verdict is not VerdictLabel.SUPPORTED else []
        reasons += citation_reasons(claim, cites.supported)
        return unchecked_verdict(claim).model_copy(
            update={
                "verdict": verdict,
                "score": score,
                "reasons": reasons,
                "evidence_ids": evidence_ids,
                "citation_supported": cites.supported,
                "citations_needed": list(cites.needed),
            }
        )

    def _explain(self, pair: PremiseCheck) -> list[Reason]:
        if isinstance(self._checker, ExplainsVerdicts):
            return self._checker.explain(pair)
        return []


def citation_reasons(claim: AnswerClaim, supported: bool | None) -> list[Reason]:
    """Reasons about a claim's citations (unknown ids, missing or not supporting)."""
    reasons = []
    if claim.unresolved:
        reasons.append(Reason("CITATION_UNKNOWN", ", ".join(claim.unresolved)))
    if supported is False:
        code = "CITATION_MISSING" if not claim.citations else "CITATION_NOT_SUPPORTING"
        reasons.append(Reason(code))
    return reasons
