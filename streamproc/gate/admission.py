"""Admission control: is there time to judge one more request within its budget?

The judge's cost is learnt from the batches it runs, in work units: a request is one
unit, or its body's bytes over :data:`UNIT_BYTES` when larger (a 480 KB body is ~120 units:
the judge reads all of its evidence). A batch of ``n`` units takes ``overhead + n *
per_unit`` seconds, both fitted as exponentially weighted moving averages (a least-squares
line through the recent (n, seconds) points; while every batch has the same size, all of
the time counts per unit). A new request then waits for what is ahead of it - the rest of
the batch being judged and the batches the queue makes, itself included - divided into
batches of ``batch_max``. No thread counts tokens here: the service asks before queueing
and sheds at once when the answer would be late anyway, so a large body whose own judging
cannot fit its budget is never queued in front of others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["UNIT_BYTES", "Admission", "work_units"]

UNIT_BYTES = 4096
"""A request body up to this size is one work unit (answers with their evidence are
mostly 1-4 KB); a larger one counts its size over this."""

_ALPHA = 0.2
_MIN_SPREAD = 0.25  # var(n) below this: the sizes are too alike to tell the overhead apart


def work_units(body_bytes: int) -> float:
    """The work units of a request whose body is ``body_bytes`` long."""
    return max(1.0, body_bytes / UNIT_BYTES)


@dataclass(slots=True)
class Admission:
    """Learnt cost of the judge and the expected finish time of a new request."""

    batch_max: int
    alpha: float = _ALPHA
    _n: float | None = None
    _t: float = 0.0
    _nn: float = 0.0
    _nt: float = 0.0

    def observe(self, batch_size: float, seconds: float) -> None:
        """One judge call of ``batch_size`` work units took ``seconds``."""
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

    def batch_s(self, size: float) -> float:
        """Expected time of one judge call of ``size`` work units."""
        return self.overhead_s + self.per_answer_s * size if size > 0 else 0.0

    def expected_finish_s(
        self,
        *,
        queued: int,
        in_flight: int,
        in_flight_elapsed_s: float,
        queued_units: float | None = None,
        in_flight_units: float | None = None,
        units: float = 1.0,
    ) -> float:
        """Seconds until a request of ``units`` joining now is judged: the rest of the
        batch in flight, then the queue's batches with the request in the last one.
        Units default to one per request."""
        flight = float(in_flight) if in_flight_units is None else in_flight_units
        ahead = float(queued) if queued_units is None else queued_units
        remaining = max(0.0, self.batch_s(flight) - in_flight_elapsed_s) if in_flight else 0.0
        batches = math.ceil((queued + 1) / self.batch_max)
        return remaining + batches * self.overhead_s + (ahead + units) * self.per_answer_s
