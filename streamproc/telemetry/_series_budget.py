"""Bounds on the worker's metric series: which label keys get series of their own, and
when a gauge another worker may have taken over is dropped (the reasons are in
:mod:`streamproc.telemetry.metrics`' docstring)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final

import structlog

__all__ = ["OTHER", "Expiry", "KeyBudget", "Series"]

log = structlog.get_logger("streamproc.telemetry.metrics")

OTHER: Final = "__other__"
"""The label value of every key past the cardinality budget."""

Series = tuple[str, ...]


class KeyBudget:
    """Which label keys may have series of their own (see the module docstring)."""

    def __init__(self, limit: int, what: str) -> None:
        self._limit = limit
        self._what = what
        self._admitted: set[Hashable] = set()
        self.refused = 0

    def admit(self, key: Hashable) -> bool:
        if key in self._admitted:
            return True
        if len(self._admitted) < self._limit:
            self._admitted.add(key)
            return True
        if self.refused == 0:
            log.warning("metric_keys_capped", keys=self._what, limit=self._limit, other=OTHER)
        self.refused += 1
        return False


class Expiry:
    """When each series of one kind was last set; :meth:`expire` drops (with ``drop``)
    those not set for ``after_s`` (None: never). ``drop`` must :meth:`forget` the series."""

    def __init__(self, after_s: float | None, drop: Callable[[Series], None]) -> None:
        self._after_s = after_s
        self._drop = drop
        self._updated: dict[Series, float] = {}

    def touched(self, series: Series, now: float) -> None:
        self._updated[series] = now

    def forget(self, series: Series) -> None:
        self._updated.pop(series, None)

    def expire(self, now: float) -> None:
        if self._after_s is None:
            return
        oldest = now - self._after_s
        for series, updated in list(self._updated.items()):
            if updated < oldest:
                self._drop(series)
