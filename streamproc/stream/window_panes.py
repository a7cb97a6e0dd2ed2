"""One pane's counters, and the sum of panes that makes a window's aggregate - pure.

A :class:`Pane` is what the window table stores per (series, pane start): counters, a
log-scale histogram of judge latency, the first few hallucinated answer ids, and its
emission state. Everything in it is bounded: the histogram has at most
:data:`LATENCY_BINS` bins and the examples list at most ``window.examples`` ids, so a
pane's changelog record stays the same size however many answers it counts (only the
counters' digits grow). A window's aggregate is the sum of its panes
(:class:`WindowTotals`), computed when it closes or is revised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, TypedDict

from streamproc.events import WindowAggregate
from streamproc.stats import wilson_interval
from streamproc.stream.windows import AnswerOutcome, SeriesKey, WindowSpec

__all__ = [
    "LATENCY_BINS",
    "Pane",
    "WindowTotals",
    "add_outcome",
    "close_pane",
    "latency_bin",
    "latency_quantile",
    "new_pane",
]

LATENCY_BINS: Final = 96
"""Bin 0 holds up to 0.1 ms; bin i >= 1 holds [0.1 * 2^((i-1)/4), 0.1 * 2^(i/4)) ms, four
bins per doubling up to about 23 minutes (the last bin is open-ended). A quantile is
reported as its bin's geometric middle: within 2^(1/8) - 1 = 9 % of the true value."""

_BASE_MS: Final = 0.1
_PER_DOUBLING: Final = 4


class Pane(TypedDict):
    """Counters of one series over one pane, JSON-ready (a window-table value)."""

    start: int
    answers: int
    answered: int
    abstained: int
    hallucinated: int
    contradicted: int
    unsupported: int
    faith_sum: float
    faith_n: int
    latency: dict[str, int]
    """Judge-latency histogram: bin number (as text, a JSON key) -> answers."""
    examples: list[str]
    """Answer ids of the first hallucinated answers counted, at most ``window.examples``."""
    late: int
    """Answers counted after the pane had closed."""
    revision: int
    """-1 until the pane first closes, 0 then, + 1 each time late answers revise it."""
    dirty: bool
    """Counted into since it was last reported (set only once closed: a late answer)."""
    reported: list[int]
    """[answered, hallucinated] as last reported, so a revision reports the difference."""
    max_event_at: float
    last_update: float
    last_event_id: str | None
    """The last event counted: recognises a redelivery of it without its seen mark (see
    ``window_table``)."""


def new_pane(start: int) -> Pane:
    return Pane(
        start=start,
        answers=0,
        answered=0,
        abstained=0,
        hallucinated=0,
        contradicted=0,
        unsupported=0,
        faith_sum=0.0,
        faith_n=0,
        latency={},
        examples=[],
        late=0,
        revision=-1,
        dirty=False,
        reported=[0, 0],
        max_event_at=start / 1000,  # at most any event time it counts
        last_update=0.0,
        last_event_id=None,
    )


def add_outcome(
    pane: Pane | None,
    outcome: AnswerOutcome,
    *,
    start: int,
    now: float,
    late: bool,
    examples: int,
) -> Pane | None:
    """The pane with one more outcome counted (a new dict; the input is left as it is),
    or None when ``outcome`` is the pane's last counted event again (a redelivery).
    ``late``: the pane has closed already, so the answer revises it."""
    if pane is not None and outcome.event_id == pane["last_event_id"]:
        return None
    updated = new_pane(start) if pane is None else _copy(pane)
    updated["answers"] += 1
    if outcome.abstained:
        updated["abstained"] += 1
    else:
        updated["answered"] += 1
        if outcome.hallucinated:
            updated["hallucinated"] += 1
            if outcome.answer_id is not None and len(updated["examples"]) < examples:
                updated["examples"].append(outcome.answer_id)
    updated["contradicted"] += outcome.contradicted_claims
    updated["unsupported"] += outcome.unsupported_claims
    if outcome.faithfulness is not None:
        updated["faith_sum"] += outcome.faithfulness
        updated["faith_n"] += 1
    if outcome.judge_ms is not None:
        bin_ = str(latency_bin(outcome.judge_ms))
        updated["latency"][bin_] = updated["latency"].get(bin_, 0) + 1
    if late:
        updated["late"] += 1
        updated["dirty"] = True
    updated["max_event_at"] = max(updated["max_event_at"], outcome.occurred_at.timestamp())
    updated["last_update"] = now
    updated["last_event_id"] = outcome.event_id
    return updated


def close_pane(pane: Pane) -> tuple[Pane, int, int]:
    """Report the pane: its first close (revision 0) or a revision after late answers
    (+ 1). Returns the new pane and the change in (answered, hallucinated) since it was
    last reported (all of it on the first report)."""
    answered_before, hallucinated_before = pane["reported"]
    closed = _copy(pane)
    closed["revision"] = pane["revision"] + 1  # -1 (never reported) becomes 0
    closed["dirty"] = False
    closed["reported"] = [pane["answered"], pane["hallucinated"]]
    return (
        closed,
        pane["answered"] - answered_before,
        pane["hallucinated"] - hallucinated_before,
    )


def latency_bin(ms: float) -> int:
    """The histogram bin of a judge time in milliseconds (see :data:`LATENCY_BINS`)."""
    if not ms > _BASE_MS:  # also NaN
        return 0
    return min(LATENCY_BINS - 1, 1 + math.floor(_PER_DOUBLING * math.log2(ms / _BASE_MS)))


def latency_quantile(histogram: Mapping[str, int], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of a histogram, as its bin's geometric middle;
    None for an empty histogram."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for bin_ in sorted(int(key) for key in histogram):
        seen += histogram[str(bin_)]
        if seen >= rank:
            return _bin_middle(bin_)
    raise AssertionError("unreachable: the ranks add up to the total")


def _bin_middle(bin_: int) -> float:
    if bin_ == 0:
        return _BASE_MS / 2
    if bin_ == LATENCY_BINS - 1:
        return _BASE_MS * 2 ** ((bin_ - 1) / _PER_DOUBLING)  # open-ended: its lower edge
    return _BASE_MS * 2 ** ((bin_ - 0.5) / _PER_DOUBLING)


@dataclass(slots=True)
class WindowTotals:
    """The sum of a window's panes, added in time order."""

    answers: int = 0
    answered: int = 0
    abstained: int = 0
    hallucinated: int = 0
    contradicted: int = 0
    unsupported: int = 0
    faith_sum: float = 0.0
    faith_n: int = 0
    late: int = 0
    weight: int = 0
    """Sum over the panes of (revision + 1): the window's revision + 1."""
    latency: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, pane: Pane, *, examples: int) -> None:
        self.answers += pane["answers"]
        self.answered += pane["answered"]
        self.abstained += pane["abstained"]
        self.hallucinated += pane["hallucinated"]
        self.contradicted += pane["contradicted"]
        self.unsupported += pane["unsupported"]
        self.faith_sum += pane["faith_sum"]
        self.faith_n += pane["faith_n"]
        self.late += pane["late"]
        self.weight += max(0, pane["revision"]) + 1
        for bin_, count in pane["latency"].items():
            self.latency[bin_] = self.latency.get(bin_, 0) + count
        room = examples - len(self.examples)
        if room > 0:
            self.examples.extend(pane["examples"][:room])

    def aggregate(
        self, key: SeriesKey, spec: WindowSpec, end_ms: int, *, now: float
    ) -> WindowAggregate:
        interval = wilson_interval(self.hallucinated, self.answered)
        return WindowAggregate(
            tenant=key.tenant,
            assistant_id=key.assistant_id,
            model=key.model,
            window=spec.label,
            window_size_s=spec.size_ms / 1000,
            window_hop_s=spec.hop_ms / 1000,
            window_start=_utc((end_ms - spec.size_ms) / 1000),
            window_end=_utc(end_ms / 1000),
            answers=self.answers,
            answered=self.answered,
            abstentions=self.abstained,
            hallucinated=self.hallucinated,
            rate=self.hallucinated / self.answered if self.answered else None,
            rate_low=interval[0] if interval else None,
            rate_high=interval[1] if interval else None,
            contradicted_claims=self.contradicted,
            unsupported_claims=self.unsupported,
            mean_faithfulness=self.faith_sum / self.faith_n if self.faith_n else None,
            judge_latency_p50_ms=latency_quantile(self.latency, 0.50),
            judge_latency_p95_ms=latency_quantile(self.latency, 0.95),
            example_answer_ids=list(self.examples),
            late_events=self.late,
            revision=max(0, self.weight - 1),
            closed_at=_utc(now),
        )


def _copy(pane: Pane) -> Pane:
    copied = pane.copy()
    copied["latency"] = dict(pane["latency"])
    copied["examples"] = list(pane["examples"])
    copied["reported"] = list(pane["reported"])
    return copied


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
