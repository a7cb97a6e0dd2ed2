"""The two interfaces every judge backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from streamproc.events import AnswerEvent, AnswerJudgement, JudgeInfo, VerdictLabel


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

    def judge_batch(self, answers: Sequence[AnswerEvent]) -> list[AnswerJudgement]:
        """One judgement per answer, in order.

        Odd but valid input (empty answers, unknown citations) is judged normally. A bug
        raises rather than passing the answer unchecked; the stream layer then re-judges
        the batch one answer at a time and dead-letters only the answer that fails.
        """
        ...
