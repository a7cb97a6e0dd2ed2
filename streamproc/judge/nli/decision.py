"""The rule-based verdict of one claim from its NLI scores, and the lines it draws.

The NLI judge asks the verifier about a claim against its candidate units (and, in some
regimes, a composed premise); this module turns those scores into a ``Settled`` verdict
with the reason and the evidence that decided it. The calibrator, when configured, then
weighs the same scores as signals; the rule's verdict and reasons are what it keeps or
overrules (:mod:`~streamproc.judge.decision.calibrated`). Pure: no model, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from streamproc.contracts.events import VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.nli.premises import ComposedPremise
from streamproc.judge.nli.retrieval import Candidate
from streamproc.judge.nli.work import AnswerWork
from streamproc.judge.protocols import NliScore
from streamproc.judge.rules.overstatement import overstated
from streamproc.judge.rules.settle import Settled
from streamproc.judge.text.claims import AnswerClaim, split_sentences
from streamproc.judge.text.evidence import EvidenceUnit
from streamproc.judge.text.negation import flips_negation

__all__ = ["NliThresholds", "decide_claim", "flips", "item_text"]


@dataclass(frozen=True, slots=True)
class NliThresholds:
    """Where the NLI judge draws its lines; defaults come from the model's manifest."""

    entailment: float = 0.5
    contradiction: float = 0.5
    min_coverage: float = 0.0
    contradiction_min_coverage: float = 0.5
    negation_min_coverage: float = 0.6

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def decide_claim(
    claim: AnswerClaim,
    candidates: Sequence[Candidate],
    work: AnswerWork,
    lookup: Mapping[tuple[str, str], NliScore],
    thresholds: NliThresholds,
    composed: ComposedPremise | None = None,
) -> Settled:
    """The rule's verdict on ``claim`` from the scores of its candidate units (and of the
    composed premise, if one was asked): a clear contradiction, then a negation flip
    by the unit closest to the claim, then entailment by the composed premise where no
    single unit entails, then the best entailing unit (unless it overstates hedged
    evidence); otherwise not entailed, with why."""
    t = thresholds
    if not candidates:
        return Settled(VerdictLabel.UNSUPPORTED, 0.0, (Reason("NO_EVIDENCE"),))
    hypothesis = work.hypothesis(claim)
    scored = [(c, lookup[(work.units[c.unit].text, hypothesis)]) for c in candidates]
    flipped = [c for c, _ in scored if flips(claim.text, work.units[c.unit], c, t)]
    entailing = [
        (c, s)
        for c, s in scored
        if s.entailment >= t.entailment and c.coverage >= t.min_coverage and c not in flipped
    ]
    best_entail = max((s.entailment for _, s in scored if _ not in flipped), default=0.0)
    relevant = [(c, s) for c, s in scored if c.coverage >= t.contradiction_min_coverage]
    best_contra = max(relevant, key=lambda cs: cs[1].contradiction, default=None)
    if (
        best_contra is not None
        and best_contra[1].contradiction >= t.contradiction
        and best_contra[1].contradiction > best_entail
    ):
        unit = work.units[best_contra[0].unit]
        return Settled(
            VerdictLabel.CONTRADICTED,
            best_entail,
            (
                Reason(
                    "NLI_CONTRADICTION",
                    f"{best_contra[1].contradiction:.2f} against "
                    f"{unit.evidence_id}: {_clip(unit.text)}",
                ),
            ),
            (unit.evidence_id,),
        )
    closest_flip = max(flipped, key=lambda c: c.coverage, default=None)
    closest_entail = max((c.coverage for c, _ in entailing), default=-1.0)
    if closest_flip is not None and closest_flip.coverage >= closest_entail:
        # the sentence that talks most closely about the claim says the opposite
        unit = work.units[closest_flip.unit]
        return Settled(
            VerdictLabel.CONTRADICTED,
            best_entail,
            (Reason("NEGATION_FLIP", f"against {unit.evidence_id}: {_clip(unit.text)}"),),
            (unit.evidence_id,),
        )
    if not entailing and composed is not None:
        fused = lookup[(composed.text, hypothesis)]
        if fused.entailment >= t.entailment:
            return Settled(
                VerdictLabel.SUPPORTED,
                fused.entailment,
                (
                    Reason(
                        "COMPOSED_PREMISE",
                        f"{fused.entailment:.2f} from {composed.sentences} "
                        f"sentences of {', '.join(composed.evidence_ids)} read together",
                    ),
                ),
                composed.evidence_ids,
            )
    if entailing:
        candidate, score = max(entailing, key=lambda cs: cs[1].entailment)
        unit = work.units[candidate.unit]
        finding = overstated(claim.text, item_text(work, unit))
        if finding is not None:
            return Settled(
                VerdictLabel.UNSUPPORTED,
                score.entailment,
                (finding.reason_text,),
                (unit.evidence_id,),
            )
        return Settled(VerdictLabel.SUPPORTED, score.entailment, (), (unit.evidence_id,))
    top = max(scored, key=lambda cs: cs[1].entailment)[0]
    unit = work.units[top.unit]
    return Settled(
        VerdictLabel.UNSUPPORTED,
        best_entail,
        (_not_entailed(best_entail, top.coverage, unit.evidence_id, t),),
        (unit.evidence_id,),
    )


def flips(claim: str, unit: EvidenceUnit, candidate: Candidate, t: NliThresholds) -> bool:
    """Some sentence of the unit talks about the same thing with the opposite
    polarity. Judged per sentence: a negation in a neighbouring sentence proves
    nothing, and a window around a flipped sentence must not 'entail' the claim."""
    threshold = t.negation_min_coverage
    if candidate.coverage < threshold:
        return False
    return any(
        flips_negation(claim, unit.text[start:end], threshold)
        for start, end in split_sentences(unit.text)
    )


def item_text(work: AnswerWork, unit: EvidenceUnit) -> str:
    """The whole evidence item a unit came from: a hedge may sit in the next sentence."""
    for item in work.answer.evidence:
        if item.id == unit.evidence_id:
            return item.text
    return unit.text


def _not_entailed(best: float, coverage: float, evidence_id: str, t: NliThresholds) -> Reason:
    """Why no unit counts as entailing: too little entailment, or entailment from a unit
    that shares too few of the claim's words to be about the same thing."""
    if best < t.entailment:
        return Reason("NOT_ENTAILED", f"best {best:.2f} < {t.entailment:.2f} ({evidence_id})")
    return Reason(
        "NOT_ENTAILED",
        f"{evidence_id} entails {best:.2f} but shares {coverage:.2f} of the "
        f"claim's words (< {t.min_coverage:.2f})",
    )


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
