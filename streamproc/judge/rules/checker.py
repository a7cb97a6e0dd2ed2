"""The rules checker: the course's cheap, transparent ``rules_judge`` as a ClaimChecker.

Numbers must match, and most content words must appear. It cannot see paraphrase
("amended bill" for "corrected invoice" reads as unsupported) nor negation ("can be
billed" over "cannot be billed" reads as supported); a model-based checker fixes those
behind the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.protocols import PremiseCheck
from streamproc.judge.text.features import content_words, numbers

__all__ = ["RULES_VERSION", "RulesChecker"]

RULES_VERSION = "1"


@dataclass(frozen=True, slots=True)
class _Finding:
    verdict: VerdictLabel
    score: float
    reasons: tuple[Reason, ...]


class RulesChecker:
    """``ClaimChecker`` by numbers and word coverage.

    Verdicts, as in the course: a number or code in the claim that the premise lacks ->
    *contradicted* when the premise has numbers of its own (it states a different one),
    else *unsupported*; otherwise content-word coverage >= ``coverage_threshold`` ->
    *supported*, else *unsupported*. Score: the coverage; 0.0 for the number-rule
    verdicts (a wrong number is no support at all), 1.0 for a claim with no content words.
    """

    name: str = "rules"

    def __init__(self, coverage_threshold: float = 0.75) -> None:
        if not 0 < coverage_threshold <= 1:
            raise ValueError(f"coverage_threshold must be in (0, 1], got {coverage_threshold}")
        self.coverage_threshold = coverage_threshold

    @property
    def thresholds(self) -> dict[str, float]:
        """What an auditor needs to replay a verdict."""
        return {"coverage": self.coverage_threshold}

    def check(self, pairs: Sequence[PremiseCheck]) -> list[tuple[VerdictLabel, float]]:
        """(verdict, score) per pair, in order."""
        return [(f.verdict, f.score) for f in self._findings(pairs)]

    def explain(self, pair: PremiseCheck) -> list[Reason]:
        """Reason codes with detail for one pair; empty when supported."""
        return list(self._findings([pair])[0].reasons)

    def _findings(self, pairs: Sequence[PremiseCheck]) -> list[_Finding]:
        # Premises repeat across the claims of an answer: featurise each one once per call.
        premise_features: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        out = []
        for pair in pairs:
            if pair.premise not in premise_features:
                premise_features[pair.premise] = (
                    numbers(pair.premise),
                    content_words(pair.premise),
                )
            out.append(self._one(pair.claim, *premise_features[pair.premise]))
        return out

    def _one(
        self, claim: str, premise_numbers: frozenset[str], premise_words: frozenset[str]
    ) -> _Finding:
        missing = numbers(claim) - premise_numbers
        if missing:
            listed = ", ".join(sorted(missing))
            if premise_numbers:
                return _Finding(
                    VerdictLabel.CONTRADICTED,
                    0.0,
                    (Reason("NUMBER_MISMATCH", f"{listed} not in the evidence"),),
                )
            return _Finding(
                VerdictLabel.UNSUPPORTED, 0.0, (Reason("NUMBER_WITHOUT_EVIDENCE", listed),)
            )
        words = content_words(claim)
        if not words:
            return _Finding(VerdictLabel.SUPPORTED, 1.0, ())
        coverage = len(words & premise_words) / len(words)
        if coverage >= self.coverage_threshold:
            return _Finding(VerdictLabel.SUPPORTED, coverage, ())
        absent = ", ".join(sorted(words - premise_words)[:8])
        reason = Reason(
            "LOW_WORD_COVERAGE",
            f"{coverage:.2f} < {self.coverage_threshold:.2f}; not in the evidence: {absent}",
        )
        return _Finding(VerdictLabel.UNSUPPORTED, coverage, (reason,))
