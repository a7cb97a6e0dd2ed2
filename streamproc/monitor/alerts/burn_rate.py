"""Multi-window, multi-burn-rate alert conditions (SRE workbook, ch. 5) - pure arithmetic.

The budget is the objective itself: with an objective of 5 % hallucinated answers, a
window whose rate is 30 % burns the budget at 6x. A condition (one long/short pair of
:class:`~streamproc.monitor.options.BurnRateWindow`) is met when

- burn(long) > factor and burn(short) > factor (the long window says "real", the short
  one says "still happening", so a page stops soon after the spike does), and
- the long window holds at least ``min_answered`` answered answers, and
- (when ``require_wilson_above_objective``) the Wilson 95 % lower bound of the long
  window's rate is above the objective: three unlucky answers never page.

Counts come from :class:`RollingCounts`, one per (tenant, assistant): a ring of closed
one-minute buckets rolled up to coarser resolutions, so summing a 3-day window costs two
lookups, not 4,320 additions, and a key's memory is bounded whatever its traffic.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from streamproc.contracts.alert_events import SEVERITIES, BurnCondition, Severity, Unmet
from streamproc.monitor.options import AlertSettings, BurnRateWindow
from streamproc.rates.stats import wilson_interval

__all__ = [
    "BUCKET_S",
    "SEVERITIES",
    "BurnCondition",
    "BurnDecision",
    "RollingCounts",
    "Severity",
    "Unmet",
    "WindowCount",
    "WindowSource",
    "alert_windows",
    "burn_condition",
    "evaluate_burn",
]

BUCKET_S: Final = 60
"""The finest resolution: counts arrive per closed one-minute bucket (or per answer)."""

_RESOLUTIONS: Final = (60, 300, 900, 3600, 21600)
_MIN_BUCKETS_PER_WINDOW: Final = 60
"""A window is summed at the coarsest resolution that still gives it 60 buckets, so it is
never short by more than 1/60 of its length (see :meth:`RollingCounts.window`)."""

_LEAD_S: Final = 600
"""Extra history kept per resolution: an evaluation may lag the newest counts by this much."""


@dataclass(frozen=True, slots=True)
class WindowCount:
    """Answered and hallucinated answers in one window ending at an evaluation time."""

    window_s: float
    answered: int
    hallucinated: int

    @property
    def rate(self) -> float | None:
        return self.hallucinated / self.answered if self.answered > 0 else None


@dataclass(frozen=True, slots=True)
class BurnDecision:
    """Every configured condition at one evaluation time (epoch seconds, event time)."""

    as_of: float
    conditions: tuple[BurnCondition, ...]

    @property
    def severity(self) -> Severity | None:
        """The highest severity with a met condition (page > ticket), None when quiet."""
        for severity in SEVERITIES:
            if self.triggering(severity) is not None:
                return severity
        return None

    def triggering(self, severity: Severity) -> BurnCondition | None:
        """The first met condition of ``severity`` in settings order, if any."""
        for condition in self.conditions:
            if condition.severity == severity and condition.met:
                return condition
        return None

    def reading(
        self, severity: Severity, long_window_s: float, short_window_s: float
    ) -> BurnCondition | None:
        """The condition of one pair (the one an open alert fired on), else the first of
        ``severity``; None only when the policy has no pair of that severity any more."""
        fallback = None
        for condition in self.conditions:
            if condition.severity != severity:
                continue
            if (condition.long_window_s, condition.short_window_s) == (
                long_window_s,
                short_window_s,
            ):
                return condition
            fallback = fallback or condition
        return fallback


class WindowSource(Protocol):
    """Anything that can count a window ending at ``as_of`` (:class:`RollingCounts`)."""

    def window(self, window_s: float, *, as_of: float) -> WindowCount: ...


def _burn(rate: float | None, objective: float) -> float | None:
    return None if rate is None else rate / objective


def burn_condition(
    severity: Severity,
    pair: BurnRateWindow,
    long: WindowCount,
    short: WindowCount,
    *,
    objective: float,
    min_answered: int,
    require_wilson: bool,
) -> BurnCondition:
    """Evaluate one long/short pair on given counts (no state, no clock)."""
    long_burn = _burn(long.rate, objective)
    short_burn = _burn(short.rate, objective)
    interval = wilson_interval(long.hallucinated, long.answered) if long.answered > 0 else None
    wilson_low = interval[0] if interval else None
    unmet: list[Unmet] = []
    if long_burn is None or long_burn <= pair.factor:
        unmet.append("long_burn")
    if short_burn is None or short_burn <= pair.factor:
        unmet.append("short_burn")
    if long.answered < min_answered:
        unmet.append("min_answered")
    if require_wilson and (wilson_low is None or wilson_low <= objective):
        unmet.append("wilson")
    return BurnCondition(
        severity=severity,
        long_window_s=pair.long_s,
        short_window_s=pair.short_s,
        factor=pair.factor,
        objective=objective,
        min_answered=min_answered,
        long_answered=long.answered,
        long_hallucinated=long.hallucinated,
        long_rate=long.rate,
        long_burn_rate=long_burn,
        long_wilson_low=wilson_low,
        short_answered=short.answered,
        short_hallucinated=short.hallucinated,
        short_rate=short.rate,
        short_burn_rate=short_burn,
        unmet=tuple(unmet),
    )


def evaluate_burn(counts: WindowSource, alerts: AlertSettings, *, as_of: float) -> BurnDecision:
    """All page and ticket conditions of ``alerts`` for one key, at event time ``as_of``
    (epoch seconds; the end of the newest closed minute)."""
    cache: dict[float, WindowCount] = {}

    def window(length_s: float) -> WindowCount:
        if length_s not in cache:
            cache[length_s] = counts.window(length_s, as_of=as_of)
        return cache[length_s]

    policy: tuple[tuple[Severity, list[BurnRateWindow]], ...] = (
        ("page", alerts.page),
        ("ticket", alerts.ticket),
    )
    conditions = []
    for severity, pairs in policy:
        for pair in pairs:
            conditions.append(
                burn_condition(
                    severity,
                    pair,
                    window(pair.long_s),
                    window(pair.short_s),
                    objective=alerts.objective,
                    min_answered=alerts.min_answered,
                    require_wilson=alerts.require_wilson_above_objective,
                )
            )
    return BurnDecision(as_of=as_of, conditions=tuple(conditions))


def alert_windows(alerts: AlertSettings) -> tuple[float, ...]:
    """Every window length the policy reads, for :class:`RollingCounts`."""
    pairs = [*alerts.page, *alerts.ticket]
    return tuple(sorted({pair.long_s for pair in pairs} | {pair.short_s for pair in pairs}))


def _resolution_for(window_s: int) -> int:
    chosen = BUCKET_S
    for resolution in _RESOLUTIONS:
        if window_s % resolution == 0 and window_s // resolution >= _MIN_BUCKETS_PER_WINDOW:
            chosen = resolution
    return chosen


class _Level:
    """Cumulative counts per bucket of one resolution, in a ring.

    ``cum[b]`` is the total added to buckets <= b, so the sum of buckets (a, b] is
    ``cum[b] - cum[a]``. The ring keeps buckets (head - size, head]; only differences are
    ever read, so adding to a bucket older than the ring changes no window.
    """

    __slots__ = ("capacity", "cum_answered", "cum_hallucinated", "head", "origin", "resolution")

    def __init__(self, resolution: int, capacity: int) -> None:
        self.resolution = resolution
        self.capacity = capacity
        self.head: int | None = None
        self.origin: int | None = None
        self.cum_answered = array("q", bytes(8 * (capacity + 1)))
        self.cum_hallucinated = array("q", bytes(8 * (capacity + 1)))

    @property
    def size(self) -> int:
        return self.capacity + 1

    def _advance(self, bucket: int) -> None:
        if self.head is None:
            self.head = self.origin = bucket
            return
        if bucket <= self.head:
            return
        last = self.head % self.size
        answered, hallucinated = self.cum_answered[last], self.cum_hallucinated[last]
        steps = min(bucket - self.head, self.size)
        for index in range(bucket - steps + 1, bucket + 1):
            self.cum_answered[index % self.size] = answered
            self.cum_hallucinated[index % self.size] = hallucinated
        self.head = bucket

    def add(self, bucket: int, answered: int, hallucinated: int) -> bool:
        self._advance(bucket)
        assert self.head is not None and self.origin is not None
        if bucket <= self.head - self.capacity:
            return False  # older than any window this level serves
        self.origin = min(self.origin, bucket)
        for index in range(bucket, self.head + 1):
            self.cum_answered[index % self.size] += answered
            self.cum_hallucinated[index % self.size] += hallucinated
        return True

    def cumulative(self, bucket: int) -> tuple[int, int]:
        if self.head is None or self.origin is None or bucket < self.origin:
            return 0, 0
        if bucket <= self.head - self.size:
            raise ValueError("evaluation too far behind the newest counts for this window")
        index = min(bucket, self.head) % self.size
        return self.cum_answered[index], self.cum_hallucinated[index]

    def to_dict(self) -> dict[str, object]:
        """Per-bucket counts of the kept buckets, non-zero ones only: [age, answered,
        hallucinated] with age 0 = the head bucket."""
        buckets: list[list[int]] = []
        if self.head is not None:
            answered, hallucinated, size = self.cum_answered, self.cum_hallucinated, self.size
            for age in range(self.capacity):
                index, before = (self.head - age) % size, (self.head - age - 1) % size
                delta_answered = answered[index] - answered[before]
                delta_hallucinated = hallucinated[index] - hallucinated[before]
                if delta_answered or delta_hallucinated:
                    buckets.append([age, delta_answered, delta_hallucinated])
        return {
            "resolution": self.resolution,
            "head": self.head,
            "origin": self.origin,
            "buckets": buckets,
        }

    def load(self, head: int | None, origin: int | None, buckets: Sequence[Sequence[int]]) -> None:
        """Restore what :meth:`to_dict` wrote (into a fresh level)."""
        if head is None or origin is None:
            return
        self.head, self.origin = head, origin
        for age, answered, hallucinated in buckets:
            self.add(head - age, answered, hallucinated)


class RollingCounts:
    """Answered and hallucinated answers of one (tenant, assistant) over sliding windows.

    Feed closed one-minute buckets (or single answers) with :meth:`add`; read any
    configured window with :meth:`window`. Each window is summed at the coarsest of
    1 min / 5 min / 15 min / 1 h / 6 h that still splits it into 60 buckets (5 min, 30 min
    and 1 h at 1 min; 6 h at 5 min; 3 d at 1 h), and each resolution keeps only what its
    longest window needs: about 220 buckets for the default policy instead of 4,320.

    Exactness: at 1-minute resolution a window is exactly the minutes in
    ``[as_of - window, as_of)``. At a coarser resolution ``r`` it is the whole buckets up
    to the one holding the newest closed minute, so it covers between ``window - r + 1
    min`` and ``window`` (a 3-day window: 71 h 1 min to 72 h), never more. Evaluate at
    or after the newest minute added: minutes after ``as_of`` that share a coarse bucket
    with the newest closed minute are counted in it.
    """

    def __init__(self, windows_s: Iterable[float]) -> None:
        lengths = sorted({_whole_minutes(window) for window in windows_s})
        if not lengths:
            raise ValueError("need at least one window")
        self.windows_s: tuple[int, ...] = tuple(lengths)
        self._resolution_of = {window: _resolution_for(window) for window in lengths}
        capacity: dict[int, int] = {}
        for window, resolution in self._resolution_of.items():
            needed = window // resolution + math.ceil(_LEAD_S / resolution)
            capacity[resolution] = max(capacity.get(resolution, 0), needed)
        self._levels = {res: _Level(res, cap) for res, cap in sorted(capacity.items())}

    @classmethod
    def for_alerts(cls, alerts: AlertSettings) -> RollingCounts:
        """Counts for every window the alert policy reads."""
        return cls(alert_windows(alerts))

    def add(self, at_s: float, answered: int, hallucinated: int) -> bool:
        """Count answers whose event time falls in the minute holding ``at_s``.

        Counts are deltas: to apply a revised (late) minute bucket, add new minus old.
        False when the minute is older than every window kept (nothing changed).
        """
        minute = math.floor(at_s / BUCKET_S)
        counted = False
        for resolution, level in self._levels.items():
            bucket = (minute * BUCKET_S) // resolution
            counted = level.add(bucket, answered, hallucinated) or counted
        return counted

    def window(self, window_s: float, *, as_of: float) -> WindowCount:
        """Answers in the ``window_s`` ending at ``as_of`` (epoch seconds, exclusive; the
        end of the newest closed minute).

        A configured window (:attr:`windows_s`) is read at its own resolution. Any other
        whole-minute length up to the longest is read at the finest resolution that keeps
        enough history for it, as ``window_s // r`` whole buckets: it covers more than
        ``window_s - 2 r`` and never more than ``window_s``.
        """
        length = _whole_minutes(window_s)
        level, buckets = self._plan(length)
        last = math.floor(as_of / BUCKET_S) * BUCKET_S - BUCKET_S  # newest closed minute
        end_bucket = last // level.resolution
        end = level.cumulative(end_bucket)
        start = level.cumulative(end_bucket - buckets)
        return WindowCount(
            window_s=window_s, answered=end[0] - start[0], hallucinated=end[1] - start[1]
        )

    def _plan(self, length: int) -> tuple[_Level, int]:
        """The level that reads a window of ``length`` seconds, and how many buckets."""
        resolution = self._resolution_of.get(length)
        if resolution is not None:
            return self._levels[resolution], length // resolution
        for level in self._levels.values():
            lead = math.ceil(_LEAD_S / level.resolution)
            if level.resolution <= length and length // level.resolution <= level.capacity - lead:
                return level, length // level.resolution
        raise ValueError(f"window {length} s is longer than the longest kept ({self.windows_s})")

    @property
    def newest_s(self) -> float | None:
        """End of the newest bucket counted at the finest resolution kept (epoch seconds;
        a minute's end with the alert policy's windows), None before any count."""
        finest = self._levels[min(self._levels)]
        if finest.head is None:
            return None
        return float((finest.head + 1) * finest.resolution)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (non-zero buckets only) for a changelog; see :meth:`from_dict`."""
        return {
            "v": 1,
            "windows_s": list(self.windows_s),
            "levels": [level.to_dict() for level in self._levels.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RollingCounts:
        if data.get("v") != 1:
            raise ValueError(f"unknown RollingCounts version {data.get('v')!r}")
        counts = cls(data["windows_s"])
        for stored in data["levels"]:
            level = counts._levels.get(stored["resolution"])
            if level is None:
                raise ValueError(f"stored resolution {stored['resolution']!r} does not fit")
            level.load(stored["head"], stored["origin"], stored["buckets"])
        return counts

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> RollingCounts:
        return cls.from_dict(json.loads(text))


def _whole_minutes(window_s: float) -> int:
    seconds = round(window_s)
    if seconds <= 0 or seconds % BUCKET_S or abs(seconds - window_s) > 1e-9:
        raise ValueError(f"windows must be whole minutes, got {window_s} s")
    return seconds
