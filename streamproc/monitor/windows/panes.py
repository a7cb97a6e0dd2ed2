"""One pane's counters, and the sum of panes that makes a window's aggregate - pure.

A :class:`Pane` is what the window table keeps per (series, pane start): counters, a
log-scale histogram of judge latency, the first few hallucinated answer ids, and its
reporting state. Everything in it is bounded: the histogram has at most
:data:`LATENCY_BINS` bins and the examples at most ``window.examples`` ids, so a pane
stays the same size however many answers it counts (only the counters' digits grow).
A pane is a slotted object in memory and a JSON list on the changelog
(:meth:`Pane.to_json`): a key holds one or two panes per minute of lateness and window
length, so each costs little, about 0.6 KB of heap and 130 to 490 bytes of changelog
(BENCHMARKS.md, "Window state"). A window's aggregate is the sum of its panes
(:class:`WindowTotals`), computed when it closes or is revised.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple, Protocol

from streamproc.contracts.events import AnswerOutcome, CorrectedRate, WindowAggregate
from streamproc.monitor.windows.spec import SeriesKey, WindowSpec
from streamproc.rates.corrected_rate import ConfusionCounts, corrected_rate_mixed
from streamproc.rates.judge_accuracy import JudgeAccuracy
from streamproc.rates.stats import wilson_interval

__all__ = [
    "LATENCY_BINS",
    "LiveCells",
    "LiveCounts",
    "LiveLookup",
    "Pane",
    "WindowTotals",
    "add_outcome",
    "close_pane",
    "latency_bin",
]

LATENCY_BINS: Final = 96
"""Bin 0 holds up to 0.1 ms; bin i >= 1 holds [0.1 * 2^((i-1)/4), 0.1 * 2^(i/4)) ms, four
bins per doubling up to about 23 minutes (the last bin is open-ended). A quantile is
reported as its bin's geometric middle: within 2^(1/8) - 1 = 9 % of the true value."""

_BASE_MS: Final = 0.1
_PER_DOUBLING: Final = 4
_FORMAT: Final = 3
"""First element of a pane's JSON list: its layout, so a later one can be told apart."""
_FORMATS_READ: Final = (1, 2, 3)


_LAYOUT: Final = (
    "start",
    "answers",
    "answered",
    "abstained",
    "hallucinated",
    "contradicted",
    "unsupported",
    "faith_sum",
    "faith_n",
    "latency",
    "examples",
    "late",
    "revision",
    "dirty",
    "reported_answered",
    "reported_hallucinated",
    "max_event_at",
    "last_update",
    "last_event_id",
    "by_task",
    "unverified",
)
"""A pane's fields, in the order of its JSON list after the layout number. Layout 1 had
no ``by_task``: such a pane reads with an empty one (its answers' task types unknown);
layouts 1 and 2 had no ``unverified``: they read with none (every answer was checked)."""
_LAYOUT_FIELDS: Final = {1: len(_LAYOUT) - 2, 2: len(_LAYOUT) - 1, _FORMAT: len(_LAYOUT)}


class LiveCounts(NamedTuple):
    """The judge's live confusion counts in one cell (effective, from weighted reviewer
    labels) and how many labelled answers they stand on."""

    counts: ConfusionCounts
    labelled_answers: int


LiveLookup = Callable[[str], LiveCounts | None]
"""Task type -> the live counts of one series' cell, None while it has too few labels."""


class LiveCells(Protocol):
    """Where the windows find the deployment's live accuracy
    (``windows/live_accuracy.py``): per (tenant, assistant, task type) of one judge."""

    def live_counts(self, tenant: str, assistant_id: str, task_type: str) -> LiveCounts | None:
        """The cell's live counts once it has enough labels, else None."""


class Pane:
    """Counters of one series over one pane."""

    __slots__ = _LAYOUT

    def __init__(self, start: int) -> None:
        self.start = start
        self.answers = 0
        self.answered = 0
        self.abstained = 0
        self.hallucinated = 0
        self.contradicted = 0
        self.unsupported = 0
        self.faith_sum = 0.0
        self.faith_n = 0
        self.latency: list[int] = []
        """Judge-latency histogram, flat: bin, answers, bin, answers, ... by bin."""
        self.examples: tuple[str, ...] = ()
        """Answer ids of the first hallucinated answers counted (``window.examples``)."""
        self.late = 0
        """Answers counted after the pane had closed."""
        self.revision = -1
        """-1 until the pane first closes, 0 then, + 1 each time late answers revise it."""
        self.dirty = False
        """Counted into since it was last reported (set only once closed: a late answer)."""
        self.reported_answered = 0
        self.reported_hallucinated = 0
        """(answered, hallucinated) as last reported, so a revision reports the change."""
        self.max_event_at = start / 1000  # at most any event time it counts
        self.last_update = 0.0
        self.last_event_id: str | None = None
        """The last event counted: recognises a redelivery of it without its seen mark
        (see ``window_table``)."""
        self.by_task: dict[str, list[int]] = {}
        """Task type -> [answered, hallucinated], for the corrected rate; answers whose
        outcome named no type are in ``answered`` only. At most three keys."""
        self.unverified = 0
        """Answers that could not be checked (``AnswerOutcome.verified`` false): in
        ``answers`` only, never in answered, abstained, hallucinated or the claims."""

    def to_json(self) -> list[Any]:
        """The pane as the changelog holds it: a JSON list, fields in slot order."""
        values = [getattr(self, name) for name in _LAYOUT]
        values[_LAYOUT.index("examples")] = list(self.examples)
        return [_FORMAT, *values]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> Pane:
        if not data or data[0] not in _FORMATS_READ:
            raise ValueError(f"not a pane of layout {_FORMATS_READ}: {str(data)[:80]}")
        layout = _LAYOUT[: _LAYOUT_FIELDS[data[0]]]
        fields = dict(zip(layout, data[1:], strict=True))
        pane = cls(int(fields["start"]))
        for name, value in fields.items():
            setattr(pane, name, value)
        pane.examples = tuple(fields["examples"])
        pane.latency = list(fields["latency"])
        pane.by_task = {task: list(counts) for task, counts in fields.get("by_task", {}).items()}
        return pane

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pane) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Pane({self.to_json()!r})"


def add_outcome(
    pane: Pane | None,
    outcome: AnswerOutcome,
    *,
    start: int,
    now: float,
    late: bool,
    examples: int,
) -> Pane | None:
    """Count one outcome into the pane (changed in place; a new pane for None), or None
    when ``outcome`` is the pane's last counted event again (a redelivery). ``late``:
    the pane has closed already, so the answer revises it."""
    if pane is None:
        pane = Pane(start)
    elif outcome.event_id == pane.last_event_id:
        return None
    pane.answers += 1
    if not outcome.verified:
        # Not checked: neither faithful nor hallucinated, so outside the rate and the
        # faithfulness; its judge time is still the judge's.
        pane.unverified += 1
    elif outcome.abstained:
        pane.abstained += 1
    else:
        pane.answered += 1
        if outcome.task_type is not None:
            counts = pane.by_task.setdefault(outcome.task_type, [0, 0])
            counts[0] += 1
            counts[1] += outcome.hallucinated
        if outcome.hallucinated:
            pane.hallucinated += 1
            if outcome.answer_id is not None and len(pane.examples) < examples:
                pane.examples = (*pane.examples, outcome.answer_id)
    if outcome.verified:
        pane.contradicted += outcome.contradicted_claims
        pane.unsupported += outcome.unsupported_claims
        if outcome.faithfulness is not None:
            pane.faith_sum += outcome.faithfulness
            pane.faith_n += 1
    if outcome.judge_ms is not None:
        _count_latency(pane.latency, latency_bin(outcome.judge_ms))
    if late:
        pane.late += 1
        pane.dirty = True
    pane.max_event_at = max(pane.max_event_at, outcome.occurred_at.timestamp())
    pane.last_update = now
    pane.last_event_id = outcome.event_id
    return pane


def close_pane(pane: Pane) -> tuple[int, int]:
    """Report the pane (in place): its first close (revision 0) or a revision after late
    answers (+ 1). Returns the change in (answered, hallucinated) since it was last
    reported (all of it on the first report)."""
    change = (
        pane.answered - pane.reported_answered,
        pane.hallucinated - pane.reported_hallucinated,
    )
    pane.revision += 1  # -1 (never reported) becomes 0
    pane.dirty = False
    pane.reported_answered, pane.reported_hallucinated = pane.answered, pane.hallucinated
    return change


def latency_bin(ms: float) -> int:
    """The histogram bin of a judge time in milliseconds (see :data:`LATENCY_BINS`)."""
    if not ms > _BASE_MS:  # also NaN
        return 0
    return min(LATENCY_BINS - 1, 1 + math.floor(_PER_DOUBLING * math.log2(ms / _BASE_MS)))


def latency_quantiles(histogram: Sequence[int], qs: Sequence[float]) -> list[float | None]:
    """The ``qs`` quantiles (ascending; nearest rank) of a flat histogram (bin, count, ...
    by bin) in one pass, each as its bin's geometric middle; None for an empty histogram."""
    total = sum(histogram[1::2])
    if total == 0:
        return [None] * len(qs)
    ranks = [max(1, math.ceil(q * total)) for q in qs]
    found: list[float | None] = []
    seen = 0
    for index in range(0, len(histogram), 2):
        seen += histogram[index + 1]
        while len(found) < len(ranks) and seen >= ranks[len(found)]:
            found.append(_bin_middle(histogram[index]))
    return found


def _count_latency(histogram: list[int], bin_: int, count: int = 1) -> None:
    for index in range(0, len(histogram), 2):
        if histogram[index] == bin_:
            histogram[index + 1] += count
            return
        if histogram[index] > bin_:
            histogram[index:index] = [bin_, count]
            return
    histogram += [bin_, count]


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
    unverified: int = 0
    hallucinated: int = 0
    contradicted: int = 0
    unsupported: int = 0
    faith_sum: float = 0.0
    faith_n: int = 0
    late: int = 0
    weight: int = 0
    """Sum over the panes of (revision + 1): the window's revision + 1."""
    latency: list[int] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    by_task: dict[str, list[int]] = field(default_factory=dict)

    def add(self, pane: Pane, *, examples: int) -> None:
        self.answers += pane.answers
        self.answered += pane.answered
        self.abstained += pane.abstained
        self.unverified += pane.unverified
        self.hallucinated += pane.hallucinated
        self.contradicted += pane.contradicted
        self.unsupported += pane.unsupported
        self.faith_sum += pane.faith_sum
        self.faith_n += pane.faith_n
        self.late += pane.late
        self.weight += max(0, pane.revision) + 1
        for task, (answered, hallucinated) in pane.by_task.items():
            counts = self.by_task.setdefault(task, [0, 0])
            counts[0] += answered
            counts[1] += hallucinated
        histogram = pane.latency
        for index in range(0, len(histogram), 2):
            _count_latency(self.latency, histogram[index], histogram[index + 1])
        room = examples - len(self.examples)
        if room > 0 and pane.examples:
            self.examples.extend(pane.examples[:room])

    def corrected(
        self, accuracy: JudgeAccuracy | None, live: LiveLookup | None = None
    ) -> CorrectedRate | None:
        """The estimated true rate (``alerting.corrected_rate``), each task type with the
        judge's accuracy on it: its live counts where ``live`` has them (the cell has
        enough reviewer labels), the offline ones otherwise. None when neither is known
        for some task type, or when some answers have no task type (outcomes of an older
        worker): a correction of part of the window would pass for the whole. The
        interval carries the live counts' uncertainty: they are few, and Lang-Reiczigel's
        variance has a term for the sampling error of Se and Sp."""
        if (accuracy is None and live is None) or not self.answered:
            return None
        parts = []
        labels_used = live_parts = 0
        for task, (answered, hallucinated) in sorted(self.by_task.items()):
            found = live(task) if live is not None else None
            if found is not None:
                counts: ConfusionCounts | None = found.counts
                labels_used += found.labelled_answers
                live_parts += 1
            else:
                counts = accuracy.for_task(task) if accuracy is not None else None
            if counts is None:
                return None
            parts.append((hallucinated, answered, counts))
        if sum(n for _, n, _ in parts) != self.answered:
            return None
        rate = corrected_rate_mixed(parts)
        if not live_parts:
            return rate
        source = "live" if live_parts == len(parts) else "mixed"
        return rate.model_copy(update={"source": source, "labels_used": labels_used})

    def aggregate(
        self,
        key: SeriesKey,
        spec: WindowSpec,
        end_ms: int,
        *,
        now: float,
        accuracy: JudgeAccuracy | None = None,
        live: LiveCells | None = None,
    ) -> WindowAggregate:
        """The window's aggregate; ``live``: the deployment's live accuracy, looked up in
        the series' own (tenant, assistant) cells."""
        lookup = (
            None
            if live is None
            else functools.partial(live.live_counts, key.tenant, key.assistant_id)
        )
        interval = wilson_interval(self.hallucinated, self.answered)
        p50, p95 = latency_quantiles(self.latency, (0.50, 0.95))
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
            unverified=self.unverified,
            hallucinated=self.hallucinated,
            rate=self.hallucinated / self.answered if self.answered else None,
            rate_low=interval[0] if interval else None,
            rate_high=interval[1] if interval else None,
            corrected_rate=self.corrected(accuracy, lookup),
            contradicted_claims=self.contradicted,
            unsupported_claims=self.unsupported,
            mean_faithfulness=self.faith_sum / self.faith_n if self.faith_n else None,
            judge_latency_p50_ms=p50,
            judge_latency_p95_ms=p95,
            example_answer_ids=list(self.examples),
            late_events=self.late,
            revision=max(0, self.weight - 1),
            closed_at=_utc(now),
        )


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
