"""The gate's latency targets judged on a report: p99 at 50 % load, what the gate adds
to the judge alone (paired answer by answer), and every request answered within budget
+ 50 ms at 200 %. Changes when a target does."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench._gate_report import fmt
from bench._gate_summary import GRACE_MS

__all__ = ["GATE_OVERHEAD_TARGET_MS", "QA_P99_TARGET_MS", "paired_overhead", "targets"]

QA_P99_TARGET_MS = 250.0
GATE_OVERHEAD_TARGET_MS = 10.0


def _level(run: Mapping[str, Any], load: float) -> Mapping[str, Any] | None:
    return next((lv for lv in run["levels"] if lv["load_pct"] == load), None)


def targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The gate's latency targets, one line per path and kind measured; ``passed`` None when the
    level needed was not run."""
    out: list[dict[str, Any]] = []
    alone = report.get("judge_alone", {})
    for run in report.get("runs", []):
        who = f"{run['path']}, {run['kind']}"
        half = _level(run, 50)
        p99 = half["latency_ms"]["p99"] if half and half["latency_ms"] else None
        limit = QA_P99_TARGET_MS if run["kind"] == "qa" else run["budget_ms"]
        out.append(_target(f"{who}: p99 at 50 % load", p99, limit, "ms"))
        quarter = _level(run, 25)
        added = paired_overhead(quarter, alone.get(run["kind"]))
        out.append(
            _target(
                f"{who}: what the gate adds at p50, 25 % load (median over the same answers "
                f"of gate latency - judge alone)",
                added["median_of_differences_ms"] if added else None,
                GATE_OVERHEAD_TARGET_MS,
                "ms",
            )
            | {"detail": added}
        )
        double = _level(run, 200)
        within = double["within_budget_plus_50ms"] if double else None
        unanswered = double["unanswered"] if double else None
        ok = None if within is None else within == 1.0 and unanswered == 0
        out.append(
            {
                "target": f"{who}: at 200 % every request answered within budget + 50 ms",
                "value": within,
                "limit": 1.0,
                "unit": "share",
                "passed": ok,
            }
        )
        latency = double["latency_ms"] if double else None
        out.append(
            _target(
                f"{who}: p99 at 200 % load, as the client measures it (p50 "
                f"{fmt(latency['p50'] if latency else None)} ms), within budget + 50 ms",
                latency["p99"] if latency else None,
                run["budget_ms"] + GRACE_MS,
                "ms",
            )
        )
    return out


def paired_overhead(
    level: Mapping[str, Any] | None, alone: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What the gate adds to a decision over the judge's own time, on the answers both
    saw (the open loop's first answers are the judge alone's): the median of the
    per-answer differences, and for comparison the difference of the two medians over
    those answers. None when either side is missing."""
    if not level or not alone or not alone.get("per_answer_ms"):
        return None
    judge_ms: Sequence[float] = alone["per_answer_ms"]
    pairs = [
        (latency, judge_ms[int(index)])
        for index, latency in level.get("latency_by_pool_index", {}).items()
        if int(index) < len(judge_ms)
    ]
    if not pairs:
        return None
    gate = [g for g, _ in pairs]
    judge = [j for _, j in pairs]
    return {
        "answers": len(pairs),
        "median_of_differences_ms": statistics.median(g - j for g, j in pairs),
        "difference_of_medians_ms": statistics.median(gate) - statistics.median(judge),
        "gate_p50_ms": statistics.median(gate),
        "judge_alone_p50_ms": statistics.median(judge),
    }


def _target(name: str, value: float | None, limit: float, unit: str) -> dict[str, Any]:
    return {
        "target": name,
        "value": value,
        "limit": limit,
        "unit": unit,
        "passed": None if value is None else value <= limit,
    }
