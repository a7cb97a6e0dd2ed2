"""Throughput, latency and memory of the judge next to a naive NLI baseline, in one run.

Prints a markdown section for BENCHMARKS.md (and writes it with ``--out``):

    .venv/bin/python -m bench judge [--judge nli|rules] [--batch-size N]
        [--per-task 20] [--runs 3] [--data FILE ...] [--out FILE.md]

Both sides judge the same fixed events: the first ``--per-task`` answers of each task
type in sha256(id) order from the dev files in ``../shared/data`` (or ``--data``), else
the in-repo samples (``streamproc/samples/*.answers.jsonl``) on a fresh clone.

* judge: ``build_judge`` on micro-batches of ``--batch-size`` answers; an answer's
  latency is its batch's wall time, as in the stream.
* baseline: the naive way - every checked claim (same decomposition) scored alone
  against the whole evidence concatenated, one answer at a time, with the NLI scorer
  of ``streamproc.inference.loader.load_nli``. Skipped, with the reason, when that
  loader or its model is not there.

Every measurement runs in a fresh process (so peak RSS belongs to one side and models
load cold), three times per side with the sides alternated, and the table quotes
medians: machines are noisy, compare ratios, not single numbers. One warm-up call per
process is not timed (the stream pays it once per worker, not per answer).

A judge may expose an ``int`` attribute counting the NLI pairs it scored (any of
``_PAIR_COUNTERS``); then a pairs/s column appears, else it is left out.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import os
import platform
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

import numpy as np

from bench import command_line
from bench.cost_model import checked_claims
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import (
    TASKS,
    BenchmarkItem,
    default_data_files,
    load_items,
)
from streamproc.evaluate.nli_ceiling import ceiling_configs, ceiling_run
from streamproc.judge import Judge, PairScorer
from streamproc.judge.engine import premise
from streamproc.judge.stage_times import collecting
from streamproc.judge.text.claims import Granularity
from streamproc.wiring import build_judge

Side = Literal["judge", "baseline", "ceiling"]
Measurement = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "streamproc" / "samples"
_PAIR_COUNTERS = ("pairs_scored", "pair_count", "pairs_checked", "scored_pairs")
_MIB = 1024 * 1024


# ------------------------------------------------------------------------------- events


def _stable(item: BenchmarkItem) -> str:
    """A fixed, content-independent order: no picking of easy answers."""
    return hashlib.sha256(item.row_id.encode()).hexdigest()


def sample_events(data: Sequence[Path] | None, per_task: int) -> tuple[list[AnswerEvent], str]:
    """The fixed sample and a sentence saying where it came from."""
    defaults = default_data_files()
    if data:
        files, origin = list(data), "the given files"
    elif all(p.is_file() for p in defaults):
        files, origin = defaults, "the dev files in ../shared/data"
    else:
        files, origin = sorted(SAMPLES.glob("*.answers.jsonl")), "the in-repo samples"
    items = load_items(files, "all")
    chosen: list[BenchmarkItem] = []
    for task in sorted({i.task_type for i in items}, key=_task_rank):
        group = sorted((i for i in items if i.task_type == task), key=_stable)
        chosen += group[:per_task]
    counts = ", ".join(
        f"{task} {sum(i.task_type == task for i in chosen)}"
        for task in sorted({i.task_type for i in chosen}, key=_task_rank)
    )
    names = ", ".join(p.name for p in files)
    text = (
        f"{len(chosen)} answers ({counts}) from {origin} ({names}): the first {per_task} "
        "per task type in sha256(id) order, judged in that order (task types mixed)"
    )
    # Mixed task types in every micro-batch, as a stream of several assistants would be.
    return [i.case.event for i in sorted(chosen, key=_stable)], text


def _task_rank(task: str) -> tuple[int, str]:
    return (TASKS.index(task) if task in TASKS else len(TASKS), task)


# -------------------------------------------------------------------------- measurement


def _rss_mib() -> float | None:
    """Resident set size now (Linux /proc), as opposed to the peak ru_maxrss reports."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / _MIB


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / _MIB if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def _pair_counter(judge: object) -> int | None:
    for name in _PAIR_COUNTERS:
        value = getattr(judge, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _load_scorer(settings: Settings) -> PairScorer:
    """The NLI scorer of the inference package for the naive baseline: one call at a time
    on all the threads (calls side by side would be the judge's own trick)."""
    loader = importlib.import_module("streamproc.inference.loader")
    inference = settings.judge.inference.model_copy(update={"nli_parallel_calls": 1})
    scorer: PairScorer = loader.load_nli(inference)
    return scorer


@dataclass(slots=True)
class _Timed:
    """What one timed pass collected: per-answer latencies and total wall time (s),
    checked claims and NLI pairs (None when the judge does not count them)."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    claims: int = 0
    pairs: int | None = None
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds per stage the judge marks (``judge.stage_times``), summed over batches."""


def _time_judge(judge: Judge, events: Sequence[AnswerEvent], batch_size: int) -> _Timed:
    """Micro-batches as in the stream: each answer waits for its whole batch."""
    timed = _Timed()
    judge.judge_batch(events[:1])  # warm-up, not timed
    before = _pair_counter(judge)
    for at in range(0, len(events), batch_size):
        batch = events[at : at + batch_size]
        started = time.perf_counter()
        with collecting() as stages:
            judgements = judge.judge_batch(batch)
        took = time.perf_counter() - started
        for mark in stages:
            timed.stages[mark.name] = timed.stages.get(mark.name, 0.0) + (
                (mark.end_ns - mark.start_ns) / 1e9
            )
        timed.wall += took
        timed.latencies += [took] * len(batch)
        timed.claims += sum(j.checked_claims for j in judgements)
    after = _pair_counter(judge)
    timed.pairs = after - before if before is not None and after is not None else None
    return timed


def _time_baseline(
    scorer: PairScorer, events: Sequence[AnswerEvent], granularity: Granularity
) -> _Timed:
    """One answer at a time, one NLI call per checked claim, whole evidence as premise."""
    timed = _Timed()
    scorer.score([("warm-up premise.", "warm-up claim.")])  # not timed
    for event in events:
        started = time.perf_counter()
        text = premise(event.question, event.evidence)
        for claim in checked_claims(event, granularity):
            scorer.score([(text, claim)])
            timed.claims += 1
        took = time.perf_counter() - started
        timed.wall += took
        timed.latencies.append(took)
    timed.pairs = timed.claims
    return timed


def measure(side: Side, judge_name: str, batch_size: int, events_json: list[str]) -> Measurement:
    """One side, one run, in this (fresh) process. Returns numbers, or ``skipped`` with
    the reason when the side cannot load or fails (the table then says so)."""
    base = Settings()
    settings = base.model_copy(update={"judge": base.judge.model_copy(update={"name": judge_name})})
    granularity = settings.judge.granularity
    events = [AnswerEvent.model_validate_json(line) for line in events_json]
    rss_start = _rss_mib()
    started = time.perf_counter()
    what = f"judge {judge_name!r}" if side == "judge" else "NLI loader"
    try:
        if side == "judge":
            judge = build_judge(settings.judge)
        else:
            scorer = _load_scorer(settings)
    except Exception as error:  # noqa: BLE001 - any failure to load means "skip, say why"
        return {"skipped": f"{what} not available: {_describe(error)}"}
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mib()
    try:
        if side == "judge":
            timed = _time_judge(judge, events, batch_size)
        else:
            timed = _time_baseline(scorer, events, granularity)
    except Exception as error:  # noqa: BLE001 - a half-built judge must not sink the run
        return {"skipped": f"{what} failed while judging: {_describe(error)}"}
    p50, p95, p99 = (float(x) * 1000 for x in np.percentile(timed.latencies, [50, 95, 99]))
    return {
        "answers": len(events),
        "claims": timed.claims,
        "pairs": timed.pairs,
        "wall_s": timed.wall,
        "answers_per_s": len(events) / timed.wall,
        "claims_per_s": timed.claims / timed.wall,
        "pairs_per_s": timed.pairs / timed.wall if timed.pairs is not None else None,
        "nli_stage_pairs_per_s": (
            timed.pairs / timed.stages["nli"]
            if timed.pairs is not None and timed.stages.get("nli")
            else None
        ),
        "stage_share": {name: took / timed.wall for name, took in timed.stages.items()},
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "load_s": load_s,
        "rss_start_mib": rss_start,
        "rss_loaded_mib": rss_loaded,
        "peak_rss_mib": _peak_rss_mib(),
    }


def measure_ceiling(judge_name: str, batch_size: int, events_json: list[str]) -> Measurement:
    """The NLI model alone on the pairs the judge asks for these events (batched as
    judged), in each configuration of ``nli_ceiling.ceiling_configs``: pairs/s each."""
    settings = Settings()
    judge = build_judge(settings.judge.model_copy(update={"name": judge_name}))
    nli_pairs = getattr(judge, "nli_pairs", None)
    if nli_pairs is None:
        return {"skipped": f"judge {judge_name!r} asks no NLI pairs"}
    events = [AnswerEvent.model_validate_json(line) for line in events_json]
    pairs: list[tuple[str, str]] = []
    for at in range(0, len(events), batch_size):
        pairs += nli_pairs(events[at : at + batch_size])
    inference = settings.judge.inference
    configs = ceiling_configs(inference.intra_op_threads)
    runs = {c.label: ceiling_run(inference, c, pairs) for c in configs}
    reference = runs[configs[0].label][1]  # one pair per call: every pair scored alone
    return {
        "pairs": len(pairs),
        "ceiling": {label: rate for label, (rate, _) in runs.items()},
        "invariant": {c.label: c.batch_invariant for c in configs},
        "logit_shift": {
            label: float(np.abs(logits - reference).max()) for label, (_, logits) in runs.items()
        },
    }


def _describe(error: BaseException) -> str:
    """The error and where it was raised, on one line (the table needs no traceback)."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _in_fresh_process(side: Side, judge: str, batch_size: int, events: list[str]) -> Measurement:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        if side == "ceiling":
            return pool.submit(measure_ceiling, judge, batch_size, events).result()
        return pool.submit(measure, side, judge, batch_size, events).result()


# ------------------------------------------------------------------------------- report


def _median(runs: Sequence[Measurement], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _cell(runs: Sequence[Measurement], key: str, digits: int = 1) -> str:
    """Median, with the range over runs when there are several."""
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return "n/a"
    mid = f"{statistics.median(values):,.{digits}f}"
    return (
        mid if len(values) < 2 else f"{mid} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def _machine(settings: Settings) -> str:
    try:
        ort = f"onnxruntime {importlib.metadata.version('onnxruntime')}"
    except importlib.metadata.PackageNotFoundError:
        ort = "no onnxruntime"
    inference = settings.judge.inference
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs "
        f"({platform.processor() or 'cpu model unknown'}), Python {platform.python_version()}, "
        f"{ort}; ONNX threads intra {inference.intra_op_threads} / inter "
        f"{inference.inter_op_threads}, NLI batch {inference.nli_batch_size} x "
        f"{inference.nli_parallel_calls} calls at once; verdict "
        f"calibrator {settings.judge.calibrator or 'off'}, embedding cache "
        f"{inference.embedding_cache_entries or 'off'}"
    )


def render(
    args: argparse.Namespace,
    results: dict[Side, list[Measurement]],
    skipped: dict[Side, str],
    sample: str,
) -> str:
    """The markdown section: how it was run, one row per side, the ratios."""
    settings = Settings()
    judge_runs, base_runs = results["judge"], results["baseline"]
    show_pairs = any(r.get("pairs") is not None for r in judge_runs)
    granularity = settings.judge.granularity
    claims = judge_runs[0]["claims"] if judge_runs else base_runs[0]["claims"] if base_runs else 0
    command = command_line()
    header = ["side", "batch", "answers/s", "claims/s"]
    header += ["NLI pairs/s"] if show_pairs else []
    header += [
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "load s",
        "RSS before load MiB",
        "RSS after load MiB",
        "peak RSS MiB",
    ]
    rows = []
    for runs, label, batch in (
        (judge_runs, f"judge `{args.judge}`", args.batch_size),
        (base_runs, "baseline: NLI, one claim at a time, whole evidence", 1),
    ):
        if not runs:
            rows.append([label, str(batch), "skipped (below)", *["-"] * (len(header) - 3)])
            continue
        cells = [label, str(batch), _cell(runs, "answers_per_s"), _cell(runs, "claims_per_s")]
        cells += [_cell(runs, "pairs_per_s")] if show_pairs else []
        cells += [_cell(runs, k, 0) for k in ("p50_ms", "p95_ms", "p99_ms")]
        cells += [_cell(runs, "load_s", 2), _cell(runs, "rss_start_mib", 0)]
        cells += [_cell(runs, "rss_loaded_mib", 0)]
        cells += [_cell(runs, "peak_rss_mib", 0)]
        rows.append(cells)
    lines = [
        f"### Judge `{args.judge}` against a naive NLI baseline",
        "",
        f"- Command: `{command}`",
        f"- When: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: "
        f"{_machine(settings)}",
        f"- Events: {sample}; {granularity} claims, {claims} checked claims.",
        f"- Runs: {args.runs} per side, each in a fresh process, sides alternated; medians "
        "(range over runs in brackets). Per-answer latency = wall time of the micro-batch "
        "the answer was in (the baseline: the answer's claims, one call each); one "
        "untimed warm-up call per process; RSS in MiB (ru_maxrss for the peak).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
    ]
    lines.append(_ratios(judge_runs, base_runs))
    lines += _stage_lines(judge_runs)
    lines += _ceiling_lines(judge_runs, results["ceiling"])
    lines += [f"- {side} skipped: {reason}" for side, reason in skipped.items()]
    if not show_pairs and judge_runs:
        lines.append(
            f"- The judge exposes no pair counter ({', '.join(_PAIR_COUNTERS)}): no "
            "NLI pairs/s column."
        )
    return "\n".join(lines).rstrip() + "\n"


def _stage_lines(judge_runs: Sequence[Measurement]) -> list[str]:
    """Where the judge's time went: each stage it marks, as a share of its wall time."""
    names = list(judge_runs[0].get("stage_share", {})) if judge_runs else []
    if not names:
        return []
    shares = [
        f"{name} {_median([r['stage_share'] for r in judge_runs], name):.0%}" for name in names
    ]
    return ["", "Judge time by stage (medians, share of wall time): " + ", ".join(shares) + "."]


def _ceiling_lines(
    judge_runs: Sequence[Measurement], ceiling_runs: Sequence[Measurement]
) -> list[str]:
    """The NLI model alone on the judge's pairs, and the judge's NLI stage against it."""
    if not ceiling_runs:
        return []
    labels = list(ceiling_runs[0]["ceiling"])
    rows = [
        [
            label,
            "yes" if ceiling_runs[0]["invariant"][label] else "no",
            _cell([r["ceiling"] for r in ceiling_runs], label, 0),
            _cell([r["logit_shift"] for r in ceiling_runs], label, 2),
        ]
        for label in labels
    ]
    best = {label: statistics.median(r["ceiling"][label] for r in ceiling_runs) for label in labels}
    invariant = max(v for k, v in best.items() if ceiling_runs[0]["invariant"][k])
    stage = _median(judge_runs, "nli_stage_pairs_per_s")
    lines = [
        "",
        f"The NLI model alone on the same {ceiling_runs[0]['pairs']:,} pairs the judge asks "
        "(its isolated ONNX Runtime ceiling, one fresh process per run, medians):",
        "",
        "| configuration | batch-invariant | pairs/s | max logit shift vs one pair per call |",
        "| --- | --- | --- | --- |",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if stage is not None:
        lines.append(
            f"The judge's NLI stage: {stage:,.0f} pairs/s (median) = "
            f"{stage / invariant:.0%} of the best batch-invariant ceiling "
            f"({invariant:,.0f} pairs/s), {stage / max(best.values()):.0%} of the best "
            f"of all ({max(best.values()):,.0f} pairs/s)."
        )
    return lines


def _ratios(judge_runs: Sequence[Measurement], base_runs: Sequence[Measurement]) -> str:
    if not judge_runs or not base_runs:
        return "Judge / baseline: n/a (one side did not run; see below)."
    parts = []
    for key, what in (("answers_per_s", "throughput"), ("p50_ms", "p50 latency")):
        judge, base = _median(judge_runs, key), _median(base_runs, key)
        if judge is not None and base:
            parts.append(f"{what} x{judge / base:.2f}")
    rss = _median(judge_runs, "peak_rss_mib"), _median(base_runs, "peak_rss_mib")
    if rss[0] is not None and rss[1]:
        parts.append(f"peak RSS x{rss[0] / rss[1]:.2f}")
    return "Judge / baseline (medians): " + ", ".join(parts) + "."


# ----------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m bench judge", description=doc.splitlines()[0])
    parser.add_argument("--judge", choices=["nli", "rules"], default="nli")
    parser.add_argument(
        "--batch-size", type=int, default=Settings().worker.batch_max, help="answers per call"
    )
    parser.add_argument("--per-task", type=int, default=20, help="answers per task type")
    parser.add_argument("--runs", type=int, default=3, help="runs per side (medians)")
    parser.add_argument("--data", type=Path, action="append", metavar="FILE")
    parser.add_argument("--out", type=Path, metavar="FILE.md", help="also write markdown here")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.per_task, args.runs) < 1:
        parser.error("--batch-size, --per-task and --runs must be 1 or more")

    events, sample = sample_events(args.data, args.per_task)
    payload = [event.model_dump_json() for event in events]
    results: dict[Side, list[Measurement]] = {"judge": [], "baseline": [], "ceiling": []}
    skipped: dict[Side, str] = {}
    for run in range(args.runs):
        order: tuple[Side, ...] = ("judge", "baseline") if run % 2 == 0 else ("baseline", "judge")
        order += ("ceiling",) if args.judge == "nli" else ()
        for side in order:
            if side in skipped:
                continue
            print(f"run {run + 1}/{args.runs}: {side} ...", file=sys.stderr, flush=True)
            found = _in_fresh_process(side, args.judge, args.batch_size, payload)
            if "skipped" in found:
                skipped[side] = found["skipped"]
                print(f"  {side} skipped: {found['skipped']}", file=sys.stderr, flush=True)
            else:
                results[side].append(found)
    section = render(args, results, skipped, sample)
    print(section)
    if args.out:
        args.out.write_text(section, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0 if results["judge"] else 1
