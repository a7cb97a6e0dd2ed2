"""Admission control: is there time to judge one more request within its budget?

The judge's cost is learnt from the batches it runs: a batch of ``n`` answers takes
``overhead + n * per_answer`` seconds, both fitted as exponentially weighted moving
averages (a least-squares line through the recent (n, seconds) points; while every batch
has the same size, all of the time counts per answer). A new request then waits for
what is ahead of it - the rest of the batch being judged and the batches the queue makes,
itself included - divided into batches of ``batch_max``. No thread counts tokens here: the
service asks before queueing and sheds at once when the answer would be late anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Admission"]

_ALPHA = 0.2
_MIN_SPREAD = 0.25  # var(n) below this: the sizes are too alike to tell the overhead apart


@dataclass(slots=True)
class Admission:
    """Learnt cost of the judge and the expected finish time of a new request."""

    batch_max: int
    alpha: float = _ALPHA
    _n: float | None = None
    _t: float = 0.0
    _nn: float = 0.0
    _nt: float = 0.0

    def observe(self, batch_size: int, seconds: float) -> None:
        """One judge call of ``batch_size`` answers took ``seconds``."""
        if batch_size <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        n = float(batch_size)
        if self._n is None:
            self._n, self._t, self._nn, self._nt = n, seconds, n * n, n * seconds
            return
        a = self.alpha
        self._n += a * (n - self._n)
        self._t += a * (seconds - self._t)
        self._nn += a * (n * n - self._nn)
        self._nt += a * (n * seconds - self._nt)

    @property
    def learnt(self) -> bool:
        return self._n is not None

    @property
    def per_answer_s(self) -> float:
        if self._n is None:
            return 0.0
        spread = self._nn - self._n * self._n
        if spread < _MIN_SPREAD:
            return self._t / self._n
        slope = (self._nt - self._n * self._t) / spread
        return slope if slope > 0 else self._t / self._n

    @property
    def overhead_s(self) -> float:
        if self._n is None:
            return 0.0
        return max(0.0, self._t - self.per_answer_s * self._n)

    def batch_s(self, size: int) -> float:
        """Expected time of one judge call of ``size`` answers."""
        return self.overhead_s + self.per_answer_s * size if size > 0 else 0.0

    def expected_finish_s(
        self, *, queued: int, in_flight: int, in_flight_elapsed_s: float
    ) -> float:
        """Seconds until a request joining now is judged: the rest of the batch in
        flight, then the queue's batches with the request in the last one."""
        remaining = max(0.0, self.batch_s(in_flight) - in_flight_elapsed_s) if in_flight else 0.0
        waiting = queued + 1
        batches = math.ceil(waiting / self.batch_max)
        return remaining + batches * self.overhead_s + waiting * self.per_answer_s
