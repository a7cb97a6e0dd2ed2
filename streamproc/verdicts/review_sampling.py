"""Which judged answers go to people for review, and with what probability.

Every answer the judge flagged (hallucinated, trimmed or withheld) is reviewed:
inclusion probability 1. Of the passed answers, a seeded share is drawn: the rate of the
most specific ``review.sample_rates`` entry matching the answer's tenant, assistant and
task type, else ``review.sample_rate``. The draw hashes ``(seed, answer_id)``, so it is
the same on every worker, on a redelivery and on a replay, and it is independent of
the judge's own decision (a passed answer's chance does not depend on anything the
judge saw). Each item records its probability: the labels loop weights a label by its
inverse, so sensitivity, specificity and precision are estimated without bias
although flagged answers are over-represented (Horvitz-Thompson).

Abstained answers are not sampled unless flagged: they are not in the rates either.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from streamproc.contracts.events import Action, AnswerEvent, Verdict
from streamproc.contracts.label_events import ReviewItem, SampledBecause
from streamproc.verdicts.options import SampleRate

__all__ = ["ReviewSampling", "review_draw"]


def review_draw(seed: int, answer_id: str) -> float:
    """A uniform number in [0, 1) fixed by the seed and the answer id."""
    digest = hashlib.sha256(f"{seed}:{answer_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, slots=True)
class ReviewSampling:
    """The sampling design of one deployment (``STREAMPROC_REVIEW__*``, as
    :func:`streamproc.wiring.stage_limits` reads them)."""

    rate: float
    rates: tuple[SampleRate, ...] = ()
    seed: int = 0
    judge_key: str | None = None
    """The judge's key in the measured-accuracy table, stamped on every item."""

    def rate_for(self, tenant: str, assistant_id: str, task_type: str | None) -> float:
        """The passed-answer rate of the most specific matching override (ties: the
        first listed), else the default."""
        best: tuple[int, float] | None = None
        for rule in self.rates:
            wanted = (rule.tenant, rule.assistant_id, rule.task_type)
            actual = (tenant, assistant_id, task_type)
            if any(w is not None and w != a for w, a in zip(wanted, actual, strict=True)):
                continue
            specificity = sum(w is not None for w in wanted)
            if best is None or specificity > best[0]:
                best = (specificity, rule.rate)
        return self.rate if best is None else best[1]

    def decide(
        self, verdict: Verdict, task_type: str | None
    ) -> tuple[SampledBecause, float] | None:
        """Why this answer is reviewed and its inclusion probability; None: not drawn."""
        judgement = verdict.judgement
        if judgement.hallucinated or judgement.action is not Action.PASS:
            return SampledBecause.FLAGGED, 1.0
        if judgement.abstained:
            return None
        rate = self.rate_for(verdict.tenant, verdict.assistant_id, task_type)
        if rate > 0 and review_draw(self.seed, verdict.answer_id) < rate:
            return SampledBecause.RANDOM, rate
        return None

    def item(
        self, answer: AnswerEvent, verdict: Verdict, task_type: str | None
    ) -> ReviewItem | None:
        """The answer's review item, when it is drawn."""
        decided = self.decide(verdict, task_type)
        if decided is None:
            return None
        because, probability = decided
        return ReviewItem(
            answer_id=verdict.answer_id,
            event_id=verdict.event_id,
            conversation_id=verdict.conversation_id,
            tenant=verdict.tenant,
            assistant_id=verdict.assistant_id,
            model=verdict.model,
            task_type=task_type,
            occurred_at=verdict.occurred_at,
            judged_at=verdict.judged_at,
            sampled_because=because,
            inclusion_probability=probability,
            question=answer.question,
            answer=answer.answer,
            evidence=list(answer.evidence),
            judgement=verdict.judgement,
            judge=verdict.judge,
            judge_key=self.judge_key,
            trace_id=verdict.trace_id,
        )
