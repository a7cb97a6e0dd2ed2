"""Options of the monitor: event-time windows and burn-rate alerts."""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from streamproc.options import OptionGroup

__all__ = ["AlertSettings", "BurnRateWindow", "HoppingWindow", "WindowSettings"]


class HoppingWindow(OptionGroup):
    """One hopping window size: a window of ``size_s`` ending every ``hop_s`` (both whole
    milliseconds; ``hop_s`` at most ``size_s``)."""

    size_s: float = Field(gt=0)
    hop_s: float = Field(gt=0)


class WindowSettings(OptionGroup):
    """Event-time windows per (tenant, assistant, model), aligned to the epoch.

    All sizes are built from panes of the largest size that divides every window size
    and hop (1 min by default): the panes are the changelogged state, a window's
    aggregate is the sum of its panes when it closes.
    """

    size_s: float = Field(default=60.0, gt=0, description="The tumbling window's size.")
    hopping: list[HoppingWindow] = Field(
        default_factory=lambda: [
            HoppingWindow(size_s=300, hop_s=60),
            HoppingWindow(size_s=3600, hop_s=300),
        ],
        description="Hopping windows, published to ``hopping_topic``; [] for none.",
    )
    grace_s: float = Field(
        default=10.0,
        ge=0,
        description="Event-time lateness accepted before a window first closes: a key's "
        "window closes once that key's own latest event time passes its end + grace.",
    )
    idle_close_s: float = Field(
        default=5.0,
        gt=0,
        description="Wall-clock seconds without new events of a key after which its windows "
        "whose end + grace has passed close anyway (replayed or sparse traffic).",
    )
    retain_closed_s: float = Field(
        default=3600.0,
        ge=0,
        description="Allowed lateness after a window closed: an event this much behind its "
        "key's latest event time (or after the key was quiet this long on the wall clock) "
        "still revises its window (re-emitted with revision + 1); a later one goes to "
        "``late_topic``.",
    )
    tick_s: float = Field(default=1.0, gt=0, description="How often closable windows are checked.")
    examples: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Answer ids of hallucinated answers carried per aggregate (the audit "
        "trail's key), at most.",
    )
    late_topic: str = Field(
        default="groundedness.late-events",
        description="Outcomes too late for any window (past ``retain_closed_s``), as judged.",
    )
    hopping_topic: str = Field(
        default="groundedness.hopping-aggregates",
        description="Aggregates of the hopping windows; the tumbling ones go to "
        "``topics.aggregates``.",
    )

    @model_validator(mode="after")
    def _panes_fit(self) -> WindowSettings:
        sizes = [self.size_s] + [s for w in self.hopping for s in (w.size_s, w.hop_s)]
        millis = [round(size * 1000) for size in sizes]
        if any(
            ms <= 0 or abs(ms - size * 1000) > 1e-6 for ms, size in zip(millis, sizes, strict=True)
        ):
            raise ValueError(f"window sizes and hops are whole milliseconds, not {sizes}")
        for window in self.hopping:
            if window.hop_s > window.size_s:
                raise ValueError(f"a hop longer than its window leaves gaps: {window}")
        pane = math.gcd(*millis)
        if max(millis) // pane > 3600:
            raise ValueError(
                f"the longest window is {max(millis) // pane} panes of {pane / 1000:g} s "
                "(at most 3600): choose sizes with a larger common divisor"
            )
        return self


class BurnRateWindow(OptionGroup):
    """One multi-window burn-rate condition (SRE workbook): the long and the short window
    must both burn the error budget faster than ``factor``."""

    long_s: float = Field(gt=0)
    short_s: float = Field(gt=0)
    factor: float = Field(gt=0)


class AlertSettings(OptionGroup):
    """Hallucination-rate objectives and the burn-rate policy that pages on them."""

    objective: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Most hallucinated share of answered answers allowed, per assistant.",
    )
    page: list[BurnRateWindow] = Field(
        default_factory=lambda: [
            BurnRateWindow(long_s=3600, short_s=300, factor=14.4),
            BurnRateWindow(long_s=6 * 3600, short_s=1800, factor=6.0),
        ],
        description="Fast burns that page.",
    )
    ticket: list[BurnRateWindow] = Field(
        default_factory=lambda: [
            BurnRateWindow(long_s=3 * 24 * 3600, short_s=6 * 3600, factor=1.0),
        ],
        description="Slow burns that open a ticket.",
    )
    min_answered: int = Field(
        default=30,
        ge=1,
        description="An alert needs at least this many answered answers in its long window.",
    )
    require_wilson_above_objective: bool = Field(
        default=True,
        description="An alert also needs the Wilson 95 % lower bound of the long window's "
        "rate above the objective (no page on a tiny unlucky sample).",
    )
    topic: str = "groundedness.alerts"
    resolve_after_s: float = Field(
        default=300.0,
        gt=0,
        description="An alert resolves once none of its conditions has held for this long "
        "(event time): one firing and one resolved event per incident.",
    )
    max_example_ids: int = Field(
        default=5, ge=0, description="Flagged answer ids carried by an alert (to the audit)."
    )
    inhibit_ticket_while_paging: bool = Field(
        default=True, description="No ticket opens for a key while its page fires."
    )
