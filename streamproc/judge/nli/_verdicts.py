"""The NLI judge's last step (level 2b): each claim's verdict from its scores - the rule
(:mod:`.decision`), the claim calibrator, truncation, citations - and the answer's
judgement from its claims (with the answer calibrator); and the judgement of the cheap
checks alone, where no model is asked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from streamproc.contracts.events import (
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    ConfidenceMark,
    UnverifiedReason,
    VerdictLabel,
)
from streamproc.contracts.reasons import Reason
from streamproc.judge.decision.actions import decide
from streamproc.judge.decision.answer import AnswerCalibrator, claim_coverage
from streamproc.judge.decision.calibrated import calibrated_decision
from streamproc.judge.decision.calibrator import VerdictCalibrator
from streamproc.judge.decision.hard_findings import has_hard_finding
from streamproc.judge.decision.signals import ClaimEvidence, claim_signals
from streamproc.judge.engine import citation_reasons
from streamproc.judge.limits import unchecked_verdict, unverified_verdict, with_limits
from streamproc.judge.nli.decision import NliThresholds, decide_claim, item_text
from streamproc.judge.nli.work import AnswerWork, ClaimWork
from streamproc.judge.protocols import NliScore
from streamproc.judge.records.structured import ValueReason
from streamproc.judge.rules.citations import assess_citations
from streamproc.judge.rules.overstatement import overstated
from streamproc.judge.rules.settle import Prechecks, Settled
from streamproc.judge.text.features import content_words, numbers

__all__ = ["VerdictAssembler", "settled_judgement"]


@dataclass(frozen=True, slots=True)
class VerdictAssembler:
    """Decides each answer from its claims' NLI scores, with the judge's thresholds and
    calibrators."""

    thresholds: NliThresholds
    calibrator: VerdictCalibrator | None
    answer_calibrator: AnswerCalibrator | None
    hard_negation: frozenset[str]

    def assemble(
        self, work: AnswerWork, lookup: Mapping[tuple[str, str], NliScore]
    ) -> AnswerJudgement:
        with work.clock.running() as clock:
            clock.check()
            verdicts: list[ClaimVerdict] = []
            risks: list[float] = []  # of the claims the calibrator decided
            coverages: list[float] = []  # and their share of words the evidence holds
            hard = False  # a hard finding refuted some claim
            for item in work.claims:
                verdict, settled = self._claim_verdict(item, work, lookup)
                verdicts.append(verdict)
                if settled:
                    hard |= verdict.verdict not in (None, VerdictLabel.SUPPORTED)
                elif verdict.risk is not None:
                    risks.append(verdict.risk)
                    coverages.append(claim_coverage(verdict.signals))
                clock.check()
            call = None
            if self.answer_calibrator is not None:
                call = self.answer_calibrator.decide(
                    work.regime,
                    risks,
                    hard,
                    hard_finding=any(has_hard_finding(v) for v in verdicts),
                    coverages=coverages,
                )
            judgement = decide(
                work.capped.verdicts(verdicts),
                [s.text for s in work.shape.sentences],
                abstained=work.shape.abstained,
                answerable=work.answer.answerable,
                hallucinated=None if call is None else call.hallucinated,
            )
            if call is not None:
                judgement = judgement.model_copy(update={"answer_risk": call.risk})
            clock.check()
            return with_limits(judgement, work.limits)

    def _claim_verdict(
        self, item: ClaimWork, work: AnswerWork, lookup: Mapping[tuple[str, str], NliScore]
    ) -> tuple[ClaimVerdict, bool]:
        """One claim's verdict (the rule, the calibrator, truncation and citations) and
        whether a hard finding settled it rather than the calibrator."""
        claim = item.claim
        base = unchecked_verdict(claim)
        if not claim.checked:
            return base, False
        rule = item.settled or decide_claim(
            item.claim, item.scored_candidates, work, lookup, self.thresholds, item.composed
        )
        signals = self._signals(item, rule, work, lookup)
        decision, risk, settled = self._calibrate(item, work, rule, signals)
        hypothesis = work.hypothesis(claim)
        cut_ids = {
            work.units[c.unit].evidence_id
            for c in item.scored_candidates
            if lookup[(work.units[c.unit].text, hypothesis)].truncated
        }
        if item.composed is not None and lookup[(item.composed.text, hypothesis)].truncated:
            cut_ids.update(item.composed.evidence_ids)
        cut = sorted(cut_ids)
        if cut:  # the model saw only part of these units: say so on the verdict
            decision = replace(
                decision,
                reasons=(*decision.reasons, Reason("EVIDENCE_TRUNCATED", ", ".join(cut))),
            )

        def supports(subset: tuple[str, ...]) -> bool:
            return self._subset_supports(item, subset, work, lookup)

        cites = assess_citations(claim.resolved, work.shape.uses_citations, supports)
        notes = list(item.prechecks.notes) if item.prechecks else []
        reasons = list(decision.reasons) + citation_reasons(claim, cites.supported) + notes
        mark = item.confidence.mark if item.confidence else None
        verdict = base.model_copy(
            update={
                "verdict": decision.verdict,
                "score": round(decision.score, 4),
                "reasons": reasons,
                "evidence_ids": list(decision.evidence_ids),
                "citation_supported": cites.supported,
                "citations_needed": list(cites.needed),
                "confidence": mark,
                "risk": risk,
                "signals": signals,
            }
        )
        return verdict, settled

    def _signals(
        self,
        item: ClaimWork,
        rule: Settled,
        work: AnswerWork,
        lookup: Mapping[tuple[str, str], NliScore],
    ) -> dict[str, float]:
        """The calibrator's inputs for one checked claim (computed with or without one)."""
        claim = item.claim
        hypothesis = work.hypothesis(claim)
        scored = [
            (c, lookup[(work.units[c.unit].text, hypothesis)]) for c in item.scored_candidates
        ]
        flipped = _is_negation_flip(rule)
        best = max(scored, key=lambda cs: cs[1].entailment, default=None)
        hedged = best is not None and (
            overstated(claim.text, item_text(work, work.units[best[0].unit])) is not None
        )
        checks = item.prechecks or Prechecks(None)
        words = content_words(claim.text)
        sentences = max(1, len(work.shape.sentences) - 1)
        found = ClaimEvidence(
            scored=scored,
            candidates=item.candidates,
            flipped=flipped,
            overstated=hedged,
            coverage_evidence=len(words & work.evidence_words) / len(words) if words else 1.0,
            unknown_numbers=checks.unknown_numbers,
            unknown_names=checks.unknown_names,
            value_mismatch=checks.count(ValueReason.VALUE_MISMATCH),
            field_not_in_record=checks.count(ValueReason.FIELD_NOT_IN_RECORD),
            value_confirmed=checks.count(ValueReason.VALUE_CONFIRMED),
            confidence_low=item.confidence is not None
            and item.confidence.mark is not ConfidenceMark.OK,
            record_claim=claim.claim_class is ClaimClass.RECORD,
            claim_words=len(words),
            position=min(1.0, claim.sentence_index / sentences),
            structured_evidence=work.structured_evidence,
            evidence_words=work.facts.word_count,
            has_question=bool(work.answer.question),
            checked_claims=work.checked_claims,
            contradiction_min_coverage=self.thresholds.contradiction_min_coverage,
            composed=None if item.composed is None else lookup[(item.composed.text, hypothesis)],
            case_evidence=work.case_evidence,
            record_confirmed=checks.record_confirmed,
        )
        return claim_signals(found)

    def _calibrate(
        self, item: ClaimWork, work: AnswerWork, rule: Settled, signals: Mapping[str, float]
    ) -> tuple[Settled, float | None, bool]:
        """The calibrated verdict and risk, or the rule's verdict when no calibrator is
        configured or a hard finding settled the claim (the third value: it did)."""
        calibrator = self.calibrator
        if calibrator is None or item.settled is not None:  # no calibrator decides: no risk
            return rule, None, True
        risk = round(calibrator.probability(signals), 4)
        if _is_negation_flip(rule) and work.regime in self.hard_negation:
            return rule, risk, True  # a hard finding: never overruled
        soft = item.prechecks.soft_reasons if item.prechecks else ()
        drivers = calibrator.contributions(signals)
        threshold = calibrator.threshold_for(signals)
        return calibrated_decision(rule, risk, threshold, drivers, soft), risk, False

    def _subset_supports(
        self,
        item: ClaimWork,
        subset: tuple[str, ...],
        work: AnswerWork,
        lookup: Mapping[tuple[str, str], NliScore],
    ) -> bool:
        """Citation recall: does the cited evidence alone (plus the question) back it?"""
        claim_numbers = numbers(item.claim.text)
        subset_text = " ".join(u.text for u in work.units if u.evidence_id in subset)
        if claim_numbers - numbers(subset_text) - numbers(work.answer.question or ""):
            return False
        decision = decide_claim(
            item.claim, item.cited.get(subset, []), work, lookup, self.thresholds
        )
        return decision.verdict is VerdictLabel.SUPPORTED


def settled_judgement(work: AnswerWork, reason: UnverifiedReason) -> AnswerJudgement:
    """The judgement of the cheap checks alone: a settled claim keeps its verdict, every
    other checked claim is ``unverified`` with ``reason``."""
    verdicts: list[ClaimVerdict] = []
    for item in work.claims:
        claim = item.claim
        if not claim.checked:
            verdicts.append(unchecked_verdict(claim))
        elif item.settled is None:
            verdicts.append(unverified_verdict(claim, Reason(reason.value)))
        else:
            settled = item.settled
            verdicts.append(
                unchecked_verdict(claim).model_copy(
                    update={
                        "verdict": settled.verdict,
                        "score": round(settled.score, 4),
                        "reasons": list(settled.reasons),
                        "evidence_ids": list(settled.evidence_ids),
                        "confidence": item.confidence.mark if item.confidence else None,
                    }
                )
            )
    judgement = decide(
        work.capped.verdicts(verdicts),
        [s.text for s in work.shape.sentences],
        abstained=work.shape.abstained,
        answerable=work.answer.answerable,
        unverified_reason=reason,
    )
    return with_limits(judgement, work.limits)


def _is_negation_flip(rule: Settled) -> bool:
    """The sentence that talks most closely about the claim says the opposite."""
    return rule.verdict is VerdictLabel.CONTRADICTED and any(
        r.code == "NEGATION_FLIP" for r in rule.reasons
    )
