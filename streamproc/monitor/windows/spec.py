"""Event-time windows: what is counted, under which key, and which windows a pane is in.

Pure arithmetic, no state and no broker (the counting is ``windows/panes.py``, the table
``windows/table.py``, the loop ``windows/loop.py``).

- A *series* is one (tenant, assistant_id, model): every window, lateness decision and
  clock belongs to one series, so one tenant's traffic can never close, revise or move
  another tenant's windows, even when they share an assistant id and a partition.
- Time is cut into *panes* aligned to the epoch: the largest size that divides every
  window size and hop (1 min by default). A window of any size is the sum of its panes:
  the tumbling window (default 1 min) and every hopping window (defaults 5 min every
  1 min and 1 h every 5 min) are computed from the same changelogged panes, so adding a
  hopping size costs no state, only the sum when it closes.
- Boundaries are whole milliseconds (``int``), so alignment never suffers float error.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from streamproc.contracts.events import AnswerOutcome
from streamproc.monitor.options import WindowSettings

__all__ = [
    "SeriesKey",
    "WindowSpec",
    "first_end_after",
    "next_window_end",
    "pane_ms_of",
    "pane_start_ms",
    "panes_between",
    "size_label",
    "window_specs",
]


class SeriesKey(NamedTuple):
    """The key every window is counted under."""

    tenant: str
    assistant_id: str
    model: str

    @classmethod
    def of(cls, outcome: AnswerOutcome) -> SeriesKey:
        return cls(outcome.tenant, outcome.assistant_id, outcome.model)

    def text(self) -> str:
        """The key as it appears inside table keys: a JSON list, so no tenant, assistant
        or model name can make two keys read the same (``a|b`` + ``c`` vs ``a`` + ``b|c``)."""
        return json.dumps(list(self), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def parse(cls, text: str) -> SeriesKey:
        tenant, assistant_id, model = json.loads(text)
        return cls(str(tenant), str(assistant_id), str(model))


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """One window size: ``size_ms`` long, one ending every ``hop_ms`` (tumbling: equal)."""

    size_ms: int
    hop_ms: int

    @property
    def tumbling(self) -> bool:
        return self.hop_ms == self.size_ms

    @property
    def label(self) -> str:
        return size_label(self.size_ms / 1000)

    def ends_containing(self, pane_start: int, pane_ms: int) -> range:
        """Ends of this size's windows that hold the pane starting at ``pane_start``: a
        window ``[end - size, end)`` holds it iff ``end - size <= start`` and
        ``end >= start + pane`` (every boundary is a multiple of the pane)."""
        first = _ceil_to(pane_start + pane_ms, self.hop_ms)
        last = _floor_to(pane_start + self.size_ms, self.hop_ms)
        return range(first, last + 1, self.hop_ms)


def window_specs(settings: WindowSettings) -> tuple[WindowSpec, ...]:
    """The tumbling window first, then the hopping ones, as configured (duplicates of
    the tumbling size left out)."""
    specs = [WindowSpec(_ms(settings.size_s), _ms(settings.size_s))]
    for hopping in settings.hopping:
        spec = WindowSpec(_ms(hopping.size_s), _ms(hopping.hop_s))
        if spec not in specs:
            specs.append(spec)
    return tuple(specs)


def pane_ms_of(specs: Sequence[WindowSpec]) -> int:
    """The pane: the largest length that divides every size and hop."""
    return math.gcd(*(length for spec in specs for length in (spec.size_ms, spec.hop_ms)))


def pane_start_ms(timestamp_s: float, pane_ms: int) -> int:
    """Start (epoch ms) of the pane that holds ``timestamp_s``."""
    return math.floor(timestamp_s * 1000 / pane_ms) * pane_ms


def first_end_after(
    pane_start: int, after: int | None, specs: Sequence[WindowSpec], pane_ms: int
) -> int | None:
    """The earliest end after ``after`` of any window that holds the pane."""
    best: int | None = None
    for spec in specs:
        ends = spec.ends_containing(pane_start, pane_ms)
        if after is not None and ends and ends[0] <= after:
            ends = ends[bisect_right(ends, after) :]
        if ends and (best is None or ends[0] < best):
            best = ends[0]
    return best


def next_window_end(
    pane_starts: Sequence[int],
    after: int | None,
    specs: Sequence[WindowSpec],
    pane_ms: int,
) -> int | None:
    """The earliest end after ``after`` of any window that holds at least one of the
    (sorted) panes; None when every such window ended by ``after``. Looks at a few panes
    only: the first whose windows can still end after ``after`` gives each size's answer."""
    best: int | None = None
    for spec in specs:
        lowest = bisect_right(pane_starts, after - spec.size_ms) if after is not None else 0
        for index in range(lowest, len(pane_starts)):
            found = first_end_after(pane_starts[index], after, (spec,), pane_ms)
            if found is not None:
                best = found if best is None else min(best, found)
                break
    return best


def panes_between(pane_starts: Sequence[int], start: int, end: int) -> Sequence[int]:
    """The sorted pane starts in ``[start, end)``."""
    return pane_starts[bisect_left(pane_starts, start) : bisect_left(pane_starts, end)]


def size_label(size_s: float) -> str:
    """A window size as a label: 60 -> "1m", 300 -> "5m", 3600 -> "1h", 86400 -> "1d",
    90 -> "90s", 5400 -> "90m", 7.5 -> "7.5s" (the ``window`` label of the metrics)."""
    seconds = round(size_s)
    if seconds <= 0 or not math.isclose(seconds, size_s):
        return f"{size_s:g}s"
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % length == 0:
            return f"{seconds // length}{unit}"
    return f"{seconds}s"


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _ceil_to(value: int, step: int) -> int:
    return -(-value // step) * step


def _floor_to(value: int, step: int) -> int:
    return value // step * step
