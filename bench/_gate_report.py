"""The gate benchmark's markdown: the judge alone, one table row per level, the
capacities and the targets with pass / fail; and the one-line progress per level.
Changes when the report's presentation does, never its numbers."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import command_line
from bench.machine import machine_info
from streamproc.config import Settings

__all__ = ["describe", "fmt", "pct", "render", "report_head"]


def report_head(pools: Mapping[str, tuple[Any, str]], log_dir: Path) -> dict[str, Any]:
    """What a gate benchmark's report opens with: its command, when, the machine, the
    judge and the gate's settings, the answer pools described, where the gate logs go."""
    settings = Settings()
    return {
        "command": command_line(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "judge": settings.judge.name,
        "gate_settings": settings.gate.model_dump(mode="json"),
        "answers": {kind: text for kind, (_, text) in pools.items()},
        "gate_logs": str(log_dir),
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def render(report: Mapping[str, Any]) -> str:
    """Markdown: the judge alone, one table row per level, the targets."""
    lines = [
        f"Gate benchmark, judge `{report['judge']}`; machine {report['machine']['nproc']} "
        f"CPUs ({report['machine']['cpu_model']}), Python {report['machine']['python']}."
    ]
    lines.append("")
    for kind, alone in report.get("judge_alone", {}).items():
        ms = alone.get("ms") or {}
        lines.append(
            f"- judge alone, {kind}: p50 {fmt(ms.get('p50'))} / p99 {fmt(ms.get('p99'))} ms "
            f"per answer ({alone.get('answers')} answers, one per call), peak RSS "
            f"{fmt(alone.get('peak_rss_mib'), 0)} MiB"
        )
    header = [
        "path", "answers", "load", "offered/s", "sent", "p50 ms", "p95 ms", "p99 ms",
        "within budget", "within +50 ms", "shed", "verified", "unanswered", "peak RSS MiB",
    ]  # fmt: skip
    lines += ["", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for run in report.get("runs", []):
        cap = run["capacity"]
        lines.append(
            f"| {run['path']} | {run['kind']} | capacity (closed loop) | - | "
            f"{cap['requests']} | - | - | - | - | - | - | - | {cap['errors']} | - |"
        )
        for lv in run["levels"]:
            lat = lv["latency_ms"] or {}
            lines.append(
                "| "
                + " | ".join(
                    [
                        run["path"],
                        run["kind"],
                        f"{lv['load_pct']:g} %",
                        fmt(lv["offered_rate"], 2),
                        str(lv["sent"]),
                        *(fmt(lat.get(k), 0) for k in ("p50", "p95", "p99")),
                        pct(lv["within_budget"]),
                        pct(lv["within_budget_plus_50ms"]),
                        pct(lv["shed"]),
                        pct(lv["verified"]),
                        str(lv["unanswered"]),
                        fmt(lv["peak_rss_mib"], 0),
                    ]
                )
                + " |"
            )
    lines += ["", "Capacity (closed loop, verified answers/s):"]
    for run in report.get("runs", []):
        lines.append(
            f"- {run['path']}, {run['kind']}: {fmt(run['capacity']['answers_per_s'], 2)} "
            f"(budget {run['budget_ms']:g} ms in the open loop; {run['repeated_answers']} "
            f"repeated answers of a pool of {run['pool']})"
        )
    lines += ["", "Targets:"]
    for each in report.get("targets", []):
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[each["passed"]]
        value = each["value"]
        shown = pct(value) if each["unit"] == "share" else f"{fmt(value)} ms"
        limit = pct(each["limit"]) if each["unit"] == "share" else f"{each['limit']:g} ms"
        lines.append(f"- {verdict}: {each['target']}: {shown} (target {limit})")
        detail = each.get("detail")
        if detail:
            lines.append(
                f"  ({detail['answers']} answers; gate p50 {fmt(detail['gate_p50_ms'])} ms, "
                f"judge alone p50 {fmt(detail['judge_alone_p50_ms'])} ms, difference of the "
                f"medians {fmt(detail['difference_of_medians_ms'])} ms)"
            )
    return "\n".join(lines) + "\n"


def describe(level: Mapping[str, Any]) -> str:
    latency = level["latency_ms"] or {}
    return (
        f"{level['answered']}/{level['sent']} answered, p50 {fmt(latency.get('p50'), 0)} "
        f"p99 {fmt(latency.get('p99'), 0)} ms, within budget {pct(level['within_budget'])}, "
        f"shed {pct(level['shed'])}, verified {pct(level['verified'])}; cores: "
        + ", ".join(f"{who} {fmt(n, 2)}" for who, n in (level.get("cpu_cores") or {}).items())
    )
