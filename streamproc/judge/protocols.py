"""The two interfaces every judge backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    JudgeInfo,
    UnverifiedReason,
    VerdictLabel,
)
from streamproc.judge.deadline import AnswerTimedOut, Deadline

__all__ = [
    "AnswerTimedOut",
    "ClaimChecker",
    "Deadline",
    "Judge",
    "NliScore",
    "PairScorer",
    "PremiseCheck",
    "SettlesCheaply",
    "TextEmbedder",
]


@dataclass(frozen=True, slots=True)
class PremiseCheck:
    """One question for a claim checker: does ``premise`` support ``claim``?"""

    claim: str
    premise: str


class ClaimChecker(Protocol):
    """Scores many claim/premise pairs in one call (batch in, verdicts out)."""

    name: str

    def check(self, pairs: Sequence[PremiseCheck]) -> list[tuple[VerdictLabel, float]]:
        """Return (verdict, support score in [0, 1]) for each pair, in order."""
        ...


class Judge(Protocol):
    """Judges whole answers. Implementations must be thread-safe for one caller at a time
    and must not touch the network: the stream worker runs them in an executor."""

    @property
    def info(self) -> JudgeInfo:
        """Name, version, granularity, thresholds and model hashes, for the audit trail."""
        ...

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        """One judgement per answer, in order.

        Odd but valid input (empty answers, unknown citations) is judged normally. A bug
        raises rather than passing the answer unchecked; the stream layer then re-judges
        the batch one answer at a time and dead-letters only the answer that fails.

        ``deadline_s`` bounds each answer's own steps (a :class:`Deadline` started per
        answer, checked between steps; the batch's shared model calls do not count): the
        first answer over it raises :class:`AnswerTimedOut` with its index, and the
        caller judges the rest again without it. None (the default, offline evaluation)
        never times out. Work caps (``JudgeLimits``) are the judge's own configuration.
        """
        ...


@dataclass(frozen=True, slots=True)
class NliScore:
    """What an NLI cross-encoder says about one (premise, hypothesis) pair.

    ``entailment`` and ``contradiction`` are in [0, 1], derived from the logits the way
    the model's manifest declares (a 3-way softmax, or a 2-logit margin read through
    calibrated bands); ``logits`` are kept raw for calibration and the audit trail.
    ``truncated`` says the pair did not fit the model and was cut (never silently).
    """

    entailment: float
    contradiction: float
    logits: tuple[float, ...]
    truncated: bool = False


class PairScorer(Protocol):
    """An NLI model: many (premise, hypothesis) pairs in, one score each out."""

    @property
    def model_name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        """Scores in input order. Implementations batch and sort by length internally."""
        ...


class TextEmbedder(Protocol):
    """A sentence-embedding model: texts in, L2-normalised float32 rows out."""

    @property
    def model_name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Shape (len(texts), dim); each row has unit length (cosine = dot product)."""
        ...


@runtime_checkable
class SettlesCheaply(Protocol):
    """Optional for a judge: the cheap checks alone (token confidence, records, values),
    no model call, every claim they leave open ``unverified`` with ``reason``. What the
    inline gate answers with when the model stage cannot finish inside a budget."""

    def settle_batch(
        self, answers: Sequence[AnswerEvent], *, reason: UnverifiedReason
    ) -> list[AnswerJudgement]: ...
