"""Per-claim signals for the learned verdict calibrator.

No single signal separates hallucinated from faithful claims on real data: NLI
entailment alone and retrieval similarity alone each rank claims little better than
chance on RAGTruth summaries, and the hand-set rules (a name or a number the evidence
lacks) misfire on paraphrase. So the judge measures everything it already computes,
as numbers, and a small trained model weighs them (``calibrator.py``).

Every signal is a plain float with a fixed name; the list ``SIGNAL_NAMES`` is the
calibrator's input contract and is written into its manifest. Signals are about the
claim and its evidence only - never about which dataset or task an answer came from -
so the calibrator cannot learn a shortcut the live stream would not have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.judge.nli.retrieval import Candidate
from streamproc.judge.protocols import NliScore

__all__ = [
    "ANSWER_CONTEXT_SIGNALS",
    "SIGNAL_DIRECTIONS",
    "SIGNAL_NAMES",
    "ClaimEvidence",
    "claim_signals",
    "entailment_logit",
]

_LOGIT_CLIP: Final = 12.0

SIGNAL_NAMES: Final[tuple[str, ...]] = (
    "entail_logit_max",  # best entailment over the candidates, as a clipped logit
    "entail_logit_top",  # entailment of the candidate retrieval ranked first
    "entail_logit_mean",  # mean entailment logit over the candidates
    "entail_logit_max_sq",  # its square / clip: lets a linear model bend
    "entail_logit_composed",  # best of entail_logit_max and the composed premise's
    "contradiction_max",  # best contradiction probability among relevant candidates
    "similarity_max",  # best embedding cosine between claim and a unit
    "similarity_top",  # cosine of the first-ranked unit
    "coverage_max",  # best share of the claim's content words one unit contains
    "coverage_evidence",  # share of the claim's content words found anywhere in evidence
    "unknown_numbers",  # claim numbers absent from the evidence (capped at 3)
    "unknown_names",  # capitalised names absent from the evidence (capped at 3)
    "negation_flip",  # the closest unit says the opposite polarity
    "overstated",  # evidence hedges what the claim states flatly
    "value_mismatch",  # record value comparison: a field disagrees
    "field_not_in_record",  # record value comparison: the record lacks the field
    "value_confirmed",  # record value comparison: a field agrees
    "confidence_low",  # token confidence marked the sentence LOW
    "record_claim",  # the claim reports on a case (ids, amounts, states)
    "claim_words_log",  # log(1 + content words of the claim)
    "position",  # relative position of the claim's sentence in the answer (0 .. 1)
    "structured_evidence",  # the evidence includes a structured record
    "evidence_words_log",  # log(1 + words of evidence)
    "has_question",  # the answer replies to a question (QA) rather than a task
    "claims_log",  # log(1 + checked claims in the answer)
    "case_evidence",  # records with fields or tool results: an answer about a case
    "record_confirmed",  # values and states of the claim the case's records confirm
)


SIGNAL_DIRECTIONS: Final[dict[str, int]] = {
    "entail_logit_max": -1,
    "entail_logit_top": -1,
    "entail_logit_mean": -1,
    "entail_logit_composed": -1,
    "contradiction_max": 1,
    "similarity_max": -1,
    "similarity_top": -1,
    "coverage_max": -1,
    "coverage_evidence": -1,
    "unknown_numbers": 1,
    "unknown_names": 1,
    "negation_flip": 1,
    "overstated": 1,
    "value_mismatch": 1,
    "field_not_in_record": 1,
    "value_confirmed": -1,
    "confidence_low": 1,
    "record_confirmed": -1,
}
"""Which way a signal may move the risk (+1 up, -1 down); unlisted signals are free.
More support must never make a claim look worse, whatever a training set rewards."""

ANSWER_CONTEXT_SIGNALS: Final = frozenset(
    {"has_question", "position", "claims_log", "evidence_words_log", "claim_words_log"}
)
"""Signals about the answer's form and task rather than about the claim's support. They
are kept on the verdict for the audit trail, but a calibrator should not be trained on
them: in a training mix they mostly say which dataset a row came from (HaluEval QA is
half hallucinated by construction, and its right answers are bare names while its
hallucinated ones are sentences), a shortcut that does not carry to live traffic."""


def entailment_logit(score: NliScore) -> float:
    """The entailment probability as a logit, clipped: linear in the model's margin for
    a margin model, and comparable across models for a softmax one."""
    p = min(max(score.entailment, 1e-6), 1 - 1e-6)
    return max(-_LOGIT_CLIP, min(_LOGIT_CLIP, math.log(p / (1 - p))))


@dataclass(frozen=True, slots=True)
class ClaimEvidence:
    """What the judge found for one claim, gathered before it is turned into numbers."""

    scored: Sequence[tuple[Candidate, NliScore]]
    flipped: bool
    overstated: bool
    coverage_evidence: float
    unknown_numbers: int
    unknown_names: int
    value_mismatch: int
    field_not_in_record: int
    value_confirmed: int
    confidence_low: bool
    record_claim: bool
    claim_words: int
    position: float
    structured_evidence: bool
    evidence_words: int
    has_question: bool
    checked_claims: int
    contradiction_min_coverage: float = 0.5
    case_evidence: bool = False
    record_confirmed: int = 0
    candidates: Sequence[Candidate] = ()
    """Every retrieved candidate, scored or not (a claim decided on its top unit alone
    has one scored): the retrieval signals read them all. Empty: the scored ones."""
    composed: NliScore | None = None
    """The claim against its top units' sentences read together, when that was asked."""


def claim_signals(found: ClaimEvidence) -> dict[str, float]:
    """The named signals of one claim, in ``SIGNAL_NAMES`` order."""
    logits = [entailment_logit(s) for _, s in found.scored]
    top = max(found.scored, key=lambda cs: cs[0].rank_score, default=None)
    relevant = [
        s.contradiction for c, s in found.scored if c.coverage >= found.contradiction_min_coverage
    ]
    best = max(logits, default=-_LOGIT_CLIP)
    retrieved = found.candidates or [c for c, _ in found.scored]
    values = {
        "entail_logit_max": best,
        "entail_logit_top": entailment_logit(top[1]) if top else -_LOGIT_CLIP,
        "entail_logit_mean": sum(logits) / len(logits) if logits else -_LOGIT_CLIP,
        "entail_logit_max_sq": best * best / _LOGIT_CLIP,
        "entail_logit_composed": max(
            best, entailment_logit(found.composed) if found.composed else -_LOGIT_CLIP
        ),
        "contradiction_max": max(relevant, default=0.0),
        "similarity_max": max((c.similarity for c in retrieved), default=0.0),
        "similarity_top": top[0].similarity if top else 0.0,
        "coverage_max": max((c.coverage for c in retrieved), default=0.0),
        "coverage_evidence": found.coverage_evidence,
        "unknown_numbers": float(min(found.unknown_numbers, 3)),
        "unknown_names": float(min(found.unknown_names, 3)),
        "negation_flip": float(found.flipped),
        "overstated": float(found.overstated),
        "value_mismatch": float(min(found.value_mismatch, 3)),
        "field_not_in_record": float(min(found.field_not_in_record, 3)),
        "value_confirmed": float(min(found.value_confirmed, 3)),
        "confidence_low": float(found.confidence_low),
        "record_claim": float(found.record_claim),
        "claim_words_log": math.log1p(found.claim_words),
        "position": found.position,
        "structured_evidence": float(found.structured_evidence),
        "evidence_words_log": math.log1p(found.evidence_words),
        "has_question": float(found.has_question),
        "claims_log": math.log1p(found.checked_claims),
        "case_evidence": float(found.case_evidence),
        "record_confirmed": float(min(found.record_confirmed, 3)),
    }
    return {name: round(values[name], 6) for name in SIGNAL_NAMES}
