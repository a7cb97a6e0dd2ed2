"""A configured judge behind a test's own ``judge_batch``: slowed, blocked, timed."""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, AnswerJudgement, JudgeInfo
from streamproc.wiring import build_judge


class WrappedJudge:
    """Delegates to the judge ``settings`` configure; subclasses add to ``judge_batch``."""

    def __init__(self, settings: Settings) -> None:
        self._inner = build_judge(settings.judge)

    @property
    def info(self) -> JudgeInfo:
        return self._inner.info

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        return self._inner.judge_batch(answers)
