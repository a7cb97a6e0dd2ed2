"""What a gate's samples say: latency percentiles, the capacity the closed loop
measured, and an open-loop level's shares (within budget, shed, verified, unanswered)
and where its time went. Arithmetic on samples only, so it is tested without a gate."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from bench._gate_callers import Reply
from bench._gate_load import Sample
from bench.stream_bench import percentile

__all__ = [
    "CAPACITY_WARM_S",
    "GRACE_MS",
    "SHED_REASON",
    "capacity_of",
    "split_latency",
    "summarise_level",
    "summarise_ms",
]

CHECK_PATH = "/v1/check"
GRACE_MS = 50.0
"""At 200 % load every request must be answered within budget + this."""
SHED_REASON = "OVERLOADED"
CAPACITY_WARM_S = 1.0
"""The first second of the closed loop fills the batches; it is not counted."""


def summarise_ms(values: Sequence[float]) -> dict[str, float] | None:
    """p50 / p95 / p99 / max / mean of milliseconds; None for none."""
    if not values:
        return None
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def capacity_of(samples: Sequence[Sample], start: float, duration_s: float) -> dict[str, Any]:
    """Verified answers per second over the closed loop after its first second, and what
    else came back."""
    window_start = start + min(CAPACITY_WARM_S, duration_s / 2)
    window_end = start + duration_s
    counted = [s for s in samples if window_start <= s.done <= window_end]
    verified = sum(1 for s in counted if s.reply.verified)
    seconds = window_end - window_start
    return {
        "answers_per_s": verified / seconds if seconds > 0 else None,
        "requests": len(samples),
        "verified_in_window": verified,
        "unverified_in_window": sum(1 for s in counted if s.reply.verified is False),
        "errors": sum(1 for s in samples if s.reply.error),
        "window_s": seconds,
        "latency_ms": summarise_ms([s.latency_ms for s in samples if not s.reply.error]),
    }


def summarise_level(
    samples: Sequence[Sample], caller_budget_ms: float, schedule_s: float
) -> dict[str, Any]:
    """A level's numbers; shares are of every request sent. "Within budget" is the
    caller's budget (the one it sent, else the gate's default), not the reply's
    ``budget_ms``: over Kafka the gate decides within less, keeping time for the reply."""
    sent = len(samples)
    answered = [s for s in samples if s.reply.error is None]

    def within(extra_ms: float) -> float | None:
        if not sent:
            return None
        ok = sum(1 for s in answered if s.latency_ms <= caller_budget_ms + extra_ms)
        return ok / sent

    def share(test: Callable[[Reply], bool]) -> float | None:
        return sum(1 for s in answered if test(s.reply)) / sent if sent else None

    last_done = max((s.done for s in answered), default=None)
    first_due = min((s.due for s in samples), default=None)
    span = None if last_done is None or first_due is None else last_done - first_due
    slips = [(s.sent - s.due) * 1000 for s in samples]
    late = [
        s
        for s in samples
        if s.reply.error is not None or s.latency_ms > caller_budget_ms + GRACE_MS
    ]
    return {
        "sent": sent,
        "offered_rate": sent / schedule_s if schedule_s > 0 else None,
        "answered": len(answered),
        "unanswered": sent - len(answered),
        "errors": dict(Counter(s.reply.error.split(":")[0] for s in samples if s.reply.error)),
        "achieved_rate": len(answered) / span if span else None,
        "latency_ms": summarise_ms([s.latency_ms for s in answered]),
        "gate_latency_ms": summarise_ms(
            [s.reply.gate_latency_ms for s in answered if s.reply.gate_latency_ms is not None]
        ),
        **split_latency(answered),
        "within_budget": within(0.0),
        "within_budget_plus_50ms": within(GRACE_MS),
        "shed": share(lambda r: r.reason == SHED_REASON),
        "verified": share(lambda r: bool(r.verified)),
        "decisions": dict(Counter(str(s.reply.decision) for s in answered)),
        "reasons": dict(Counter(str(s.reply.reason) for s in answered if s.reply.reason)),
        "send_slip_ms": summarise_ms(slips),
        "late_at_s": [] if first_due is None else [round(s.due - first_due, 3) for s in late[:200]],
        "latency_by_pool_index": {
            str(s.pool_index): s.latency_ms for s in answered if s.pool_index is not None
        },
    }


def split_latency(answered: Sequence[Sample]) -> dict[str, Any]:
    """Where a verified reply's time went: the judge call it was in (``judge_ms``), the
    rest of the gate's own time (queueing behind a batch, parsing, the reply), and the
    rest of what the caller waited (transport, the caller's own event loop); and what an
    answer judged alone (a batch of one, mostly one that met an idle gate) waited beyond
    its judge call."""
    judged = [
        s
        for s in answered
        if s.reply.verified and s.reply.judge_ms is not None and s.reply.gate_latency_ms
    ]
    return {
        "judge_call_ms": summarise_ms([s.reply.judge_ms or 0.0 for s in judged]),
        "in_gate_beyond_judge_ms": summarise_ms(
            [(s.reply.gate_latency_ms or 0.0) - (s.reply.judge_ms or 0.0) for s in judged]
        ),
        "outside_gate_ms": summarise_ms(
            [s.latency_ms - (s.reply.gate_latency_ms or 0.0) for s in judged]
        ),
        "batch_sizes": dict(Counter(s.reply.batch_size for s in judged)),
        "batch_of_one_beyond_judge_ms": summarise_ms(
            [s.latency_ms - (s.reply.judge_ms or 0.0) for s in judged if s.reply.batch_size == 1]
        ),
    }
