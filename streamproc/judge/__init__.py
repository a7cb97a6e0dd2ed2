"""The judge: a pure library. Answers and evidence in, verdicts out.

No Kafka, no faust, no globals, no I/O except loading a model. The stream worker and
the offline evaluation call the very same object.

The public seam is :class:`Judge`: it takes a *batch* of answers so that a model-based
judge can micro-batch claim/evidence pairs across events (one inference call for many
answers). :class:`ClaimChecker` is the smaller seam below it: "is this claim supported
by this premise?" for many pairs at once; the rules checker implements it now, an NLI
checker does it for the NLI judge.

Each answer's work is capped (``JudgeLimits``: claims, evidence units, their lengths;
every cap hit is named on the judgement) and may be given a per-answer deadline
(``judge_batch(..., deadline_s=...)`` raises :class:`AnswerTimedOut` with the answer's
index).
"""

from __future__ import annotations

from streamproc.judge.deadline import AnswerTimedOut, Deadline
from streamproc.judge.protocols import (
    ClaimChecker,
    Judge,
    NliScore,
    PairScorer,
    PremiseCheck,
    TextEmbedder,
)

__all__ = [
    "AnswerTimedOut",
    "ClaimChecker",
    "Deadline",
    "Judge",
    "NliScore",
    "PairScorer",
    "PremiseCheck",
    "TextEmbedder",
]
