"""The stream benchmark's markdown: the table of phases, the stream / offline ratios,
where the latency went and the lag series; and the one-line progress per phase. Changes
when the report's presentation does, never its numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.stream_bench import PhaseResult
from streamproc.config import Settings

__all__ = ["describe", "fmt", "render", "settings_in_force"]


def describe(result: PhaseResult) -> str:
    rate = result.sustained_rate if result.mode == "saturation" else result.achieved_rate
    p99 = f"{result.latency.p99_ms:.0f} ms" if result.latency else "n/a"
    return (
        f"{result.decided}/{result.sent} decided, {fmt(rate)} answers/s, p99 {p99}, "
        f"max lag {result.max_lag}"
    )


def settings_in_force() -> dict[str, Any]:
    """The defaults every phase's workers run with (besides names and ONNX threads)."""
    settings = Settings()
    return {
        "worker": settings.worker.model_dump(mode="json"),
        "partitions": settings.topics.partitions,
        "inference": settings.judge.inference.model_dump(mode="json"),
        "calibrator": settings.judge.calibrator,
        "audit_enabled": settings.audit.enabled,
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _judge_times(part_ms: Mapping[str, float] | None) -> str:
    """One part of the latency (e.g. the judge's batch time) at p50 and p99."""
    if not part_ms:
        return "-"
    return f"{fmt(part_ms['p50'], 0)} / {fmt(part_ms['p99'], 0)}"


def render(report: dict[str, Any]) -> str:
    """The markdown table and the ratios, for a reader and for BENCHMARKS.md."""
    header = [
        "workers x threads",
        "mode",
        "offered/s",
        "sent",
        "decided",
        "dead",
        "missing",
        "sustained/s",
        "achieved/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "judge p50 / p99 ms",
        "mean batch",
        "lag max",
        "lag end",
        "peak RSS MiB",
    ]
    rows = []
    for config in report["configs"]:
        who = f"{config['workers']} x {config['threads_per_worker']}"
        for phase in config["phases"]:
            latency = phase["latency_ms"] or {}
            mode = (
                "saturation (backlog)"
                if phase["mode"] == "saturation"
                else f"open loop {phase['load']:.0%}"
            )
            rows.append(
                [
                    who,
                    mode,
                    fmt(phase["offered_rate"], 2) if phase["offered_rate"] else "-",
                    str(phase["sent"]),
                    str(phase["decided"]),
                    str(phase["dead_letters"]),
                    str(phase["missing"]),
                    fmt(phase["sustained_rate"], 2),
                    fmt(phase["achieved_rate"], 2),
                    *(fmt(latency.get(k), 0) for k in ("p50", "p95", "p99")),
                    _judge_times(phase.get("judge_ms")),
                    fmt(phase.get("mean_batch"), 1) if phase.get("mean_batch") else "-",
                    str(phase["max_lag"]),
                    str(phase["final_lag"]),
                    fmt(phase.get("peak_rss_mib"), 0),
                ]
            )
    offline = report["offline"]
    lines = [
        f"Stream benchmark, judge `{report['judge']}` (in a {report['judge_in']} of each "
        f"worker): {report['events']}; broker "
        f"{report['broker']}; machine {report['machine']['nproc']} CPUs "
        f"({report['machine']['cpu_model']}), Python {report['machine']['python']}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if "skipped" in offline:
        lines.append(f"Offline judge: skipped ({offline['skipped']}).")
    else:
        lines.append(
            f"Offline judge (called directly, batches of {report['batch_size']}, fresh "
            f"process): {offline['answers_per_s']:.2f} answers/s on the same "
            f"{offline['answers']} answers as the backlog."
        )
        for config in report["configs"]:
            ratio = config.get("stream_over_offline")
            lines.append(
                f"- stream / offline, {config['workers']} worker(s): "
                f"{'n/a' if ratio is None else f'x{ratio:.2f}'} (target >= 0.90)"
            )
    for config in report["configs"]:
        for phase in config["phases"]:
            if phase["load"] == 0.5 and phase["latency_ms"]:
                lines.append(
                    f"- p99 decision latency at 50 % load, {config['workers']} worker(s): "
                    f"{phase['latency_ms']['p99']:,.0f} ms (target <= 1,500 ms on the mix, "
                    "<= 300 ms on QA-like traffic: --task QA)"
                )
    lines += ["", "Where the decision latency goes (p50 / p99 ms of each part):"]
    for config in report["configs"]:
        for phase in config["phases"]:
            name = "saturation" if phase["mode"] == "saturation" else f"{phase['load']:.0%}"
            lines.append(
                f"- {config['workers']} worker(s), {name}: before judging (reading, waiting "
                f"for the batch in flight) {_judge_times(phase.get('before_judge_ms'))}, "
                f"judging {_judge_times(phase.get('judge_ms'))}, after (publishing, commit, "
                f"reading the verdict) {_judge_times(phase.get('after_judge_ms'))}"
            )
    lines += ["", "Judge-group lag, one sample per second:"]
    for config in report["configs"]:
        for phase in config["phases"]:
            lags = " ".join(str(lag) for _, lag in phase["lag_samples"])
            name = "saturation" if phase["mode"] == "saturation" else f"{phase['load']:.0%}"
            lines.append(f"- {config['workers']} worker(s), {name}: {lags}")
    return "\n".join(lines) + "\n"
