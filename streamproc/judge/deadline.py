"""A per-answer time budget the judge checks cooperatively.

Python cannot stop a thread that runs a regex or a model call, so the judge itself looks
at the clock between the steps of one answer (decomposition, evidence units, each claim)
and gives up on that answer with :class:`AnswerTimedOut`. The stream stage then
dead-letters it (``judge_timeout``) and judges the rest of the batch again without it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["AnswerTimedOut", "Deadline"]


class AnswerTimedOut(Exception):  # noqa: N818 - reads as what happened to the answer
    """The answer at ``index`` of the batch overran its budget."""

    def __init__(self, index: int, elapsed_s: float, budget_s: float) -> None:
        super().__init__(
            f"answer {index} of the batch took {elapsed_s:.2f} s, over its {budget_s:g} s budget"
        )
        self.index = index
        self.elapsed_s = elapsed_s
        self.budget_s = budget_s


@dataclass(slots=True)
class Deadline:
    """The budget of one answer: ``check()`` raises once ``budget_s`` has passed since
    ``start()``. ``budget_s=None`` never expires."""

    budget_s: float | None
    index: int = 0
    _started: float = field(default=0.0, init=False)

    def start(self, index: int) -> Deadline:
        self.index = index
        self._started = time.perf_counter()
        return self

    def check(self) -> None:
        if self.budget_s is None:
            return
        elapsed = time.perf_counter() - self._started
        if elapsed > self.budget_s:
            raise AnswerTimedOut(self.index, elapsed, self.budget_s)
