"""A per-answer time budget the judge checks cooperatively.

Python cannot stop a thread that runs a regex or a model call, so the judge itself looks
at the clock between the steps of one answer (decomposition, evidence units, each claim)
and gives up on that answer with :class:`AnswerTimedOut`. The stream stage then
dead-letters it (``judge_timeout``) and judges the rest of the batch again without it.

Only the answer's *own* steps count: the judge pauses an answer's clock while it works on
the other answers of the batch and during the batch's shared model calls (one embedding
call, one NLI call for all answers), which the work caps bound instead. Otherwise the
first answer of a large batch would pay for everyone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["AnswerTimedOut", "Deadline"]


class AnswerTimedOut(Exception):
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
    """The budget of one answer: ``check()`` raises once the clock has run for more than
    ``budget_s`` since ``start()`` (paused stretches not counted). ``budget_s=None``
    never expires."""

    budget_s: float | None
    index: int = 0
    _spent: float = field(default=0.0, init=False)
    _since: float | None = field(default=None, init=False)

    def start(self, index: int) -> Deadline:
        """(Re)start the clock for the answer at ``index`` of the batch."""
        self.index = index
        self._spent = 0.0
        self._since = time.perf_counter()
        return self

    def pause(self) -> None:
        """Stop the clock: the batch is busy with other answers or shared work."""
        if self._since is not None:
            self._spent += time.perf_counter() - self._since
            self._since = None

    def resume(self) -> None:
        """Run the clock again from where it was paused."""
        if self._since is None:
            self._since = time.perf_counter()

    @contextmanager
    def running(self) -> Iterator[Deadline]:
        """Run the clock for the steps inside the ``with`` block only."""
        self.resume()
        try:
            yield self
        finally:
            self.pause()

    @property
    def elapsed_s(self) -> float:
        """Seconds this answer's clock has run."""
        running = time.perf_counter() - self._since if self._since is not None else 0.0
        return self._spent + running

    def check(self) -> None:
        """Raise :class:`AnswerTimedOut` when the budget is spent."""
        if self.budget_s is None:
            return
        elapsed = self.elapsed_s
        if elapsed > self.budget_s:
            raise AnswerTimedOut(self.index, elapsed, self.budget_s)
