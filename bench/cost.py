"""What the judge costs per answer, in CPU seconds, as evidence and claims grow.

Prints a markdown section for the cost model in BENCHMARKS.md (``--out`` writes it,
``--json`` the numbers behind it):

    .venv/bin/python -m bench cost [--answers 12] [--runs 3]
        [--qa-lengths 5,20,80] [--rag-lengths 100,200,300] [--claims 1,4,16]
        [--seed 20250611] [--pool 1000] [--data FILE ...] [--out FILE.md] [--json FILE]

Events: ``sample_events`` of ``python -m bench judge`` (the dev files in ../shared/data,
sha256(id) order), the first ``--pool`` answers per task type. Two kinds of traffic,
measured apart: QA-like (HaluEval QA) and RAGTruth-like (Summary and Data2txt, taking
turns). Each takes its first ``--answers`` answers whose own evidence is no longer than
its shortest evidence length (padding never cuts evidence; the report says how many were
passed over). Variants of those answers (bench/cost_model.py):

* as sent: the answers unchanged - the line "cores per 100 answers/s" is read off these;
* evidence N (``--qa-lengths`` / ``--rag-lengths``): each answer, its question and its own
  evidence items unchanged, plus one passage item of real evidence sentences of *other*
  answers of the same task type, one per line, until the evidence holds exactly N
  sentences as the judge counts them (its sentence units: prose sentences and record
  "field: value" lines; no question, no windows). The padding sentences are distinct,
  each one the judge's splitter reads back as one sentence, dealt to the answers from a
  shuffle seeded with ``--seed`` so that no two answers share one (the judge embeds a
  text once per batch: shared padding would be cheaper than new evidence). A longer
  variant extends a shorter one: the claims stay, only the evidence grows. The RAGTruth
  lengths start at the longest evidence of most of its answers and stay below the
  judge's cap of 400 evidence units (``judge.limits.max_evidence_units``); the pool of
  RAGTruth dev sentences (about 2,000 per task type) bounds how far they can go;
* claims K (``--claims``, RAGTruth-like only): each answer's own sentences in order while
  they fit, then the sentences of other answers of the same task type, answer by answer
  in a seeded shuffle, one per line, each kept only if the answer then has exactly the
  checked claims counted so far, until exactly K checked claims; every answer a sentence
  came from brings its whole evidence, so the evidence grows with the claims (the table
  shows it; the least-squares cost model separates the two). QA-like traffic has no
  claims axis: its answers are one short answer to a question ("1932"), which the judge
  reads together with that question, so sentences of different QA answers cannot share
  one answer without changing what is judged.

Measurement: every run is one fresh process (spawn, as ``python -m bench judge`` does) that
builds the judge of ``Settings().judge`` (the default NLI judge: owned verifier,
embedder and calibrator) with the embedding cache turned off
(``inference.embedding_cache_entries=0`` on a copy of the settings), so that evidence
sentences repeated across variants and runs are embedded every time, as new traffic
would be. One untimed warm-up answer per process, then every variant in micro-batches of
``Settings().worker.batch_max`` answers (reversed order on every other run). Per variant:
CPU seconds = ``time.process_time()`` of the judging process over its ``judge_batch``
calls (every thread of the process: ONNX Runtime's included), wall seconds =
``time.perf_counter()``, NLI pairs = the judge's ``pairs_scored`` counter (pairs are
deduplicated within a batch), embedded texts = texts handed to the embedder (counted by
wrapping what ``streamproc.inference.loader.load_embedder`` returns in
``cost_model.CountingEmbedder`` inside the measuring process), the NLI stage's share of
wall time (the judge's ``nli`` stage), and the answers that hit a work cap. The table
quotes medians over ``--runs`` (range in brackets). Cores per 100 answers/s =
100 x CPU s per answer: the cores a pool of workers would keep busy at that rate.

The defaults take about 4-5 minutes on a quiet 2-core machine (about 80 s per run, three
runs, plus building the variants). Run it on a quiet machine: when other work shares the
cores, ONNX Runtime's waiting threads spin and the CPU seconds come out inflated.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench import command_line
from bench.cost_model import (
    TRAFFIC_TASKS,
    CountingEmbedder,
    Traffic,
    Variant,
    VariantResult,
    checked_claims,
    claims_variants,
    cores_per_100,
    evidence_sentences,
    evidence_variants,
    median_of,
    padding_pools,
    render_markdown,
    select_traffic,
    sentence_pool,
)
from bench.judge import sample_events
from bench.machine import machine_info
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import task_type_of
from streamproc.inference.options import JudgeSettings
from streamproc.judge.stage_times import collecting
from streamproc.wiring import build_judge

Payload = list[tuple[str, list[str]]]
"""(variant name, its events as JSON lines), in judging order."""


# -------------------------------------------------------------------------- measurement


def _judge_settings() -> JudgeSettings:
    """The configured judge with the embedding cache off (see the module docstring)."""
    judge = Settings().judge
    inference = judge.inference.model_copy(update={"embedding_cache_entries": 0})
    return judge.model_copy(update={"inference": inference})


def _build_counted() -> tuple[Any, list[CountingEmbedder]]:
    """The judge, and the counting wrapper(s) around the embedder(s) it loaded (none
    when the judge loads no embedder, or not through the loader: then n/a)."""
    loader = importlib.import_module("streamproc.inference.loader")
    original: Callable[..., Any] = loader.load_embedder
    counters: list[CountingEmbedder] = []

    def counted(*args: Any, **kwargs: Any) -> CountingEmbedder:
        counters.append(CountingEmbedder(original(*args, **kwargs)))
        return counters[-1]

    setattr(loader, "load_embedder", counted)  # noqa: B010 - this process only
    try:
        judge = build_judge(_judge_settings())
    finally:
        setattr(loader, "load_embedder", original)  # noqa: B010
    return judge, counters


def _counter(judge: object) -> int | None:
    value = getattr(judge, "pairs_scored", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def measure(payload: Payload, batch_size: int) -> dict[str, dict[str, Any]]:
    """Every variant of ``payload``, in order, in this (fresh) process."""
    started = time.perf_counter()
    judge, counters = _build_counted()
    load_s = time.perf_counter() - started
    first = AnswerEvent.model_validate_json(payload[0][1][0])
    judge.judge_batch([first])  # warm-up, not timed
    out: dict[str, dict[str, Any]] = {}
    for name, lines in payload:
        events = [AnswerEvent.model_validate_json(line) for line in lines]
        pairs0, texts0 = _counter(judge), sum(c.texts for c in counters)
        nli_s, caps = 0.0, 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for at in range(0, len(events), batch_size):
            with collecting() as stages:
                judgements = judge.judge_batch(events[at : at + batch_size])
            nli_s += sum((t.end_ns - t.start_ns) / 1e9 for t in stages if t.name == "nli")
            caps += sum(bool(j.limits) for j in judgements)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        pairs1 = _counter(judge)
        n = len(events)
        out[name] = {
            "answers_per_s": n / wall,
            "cpu_s_per_answer": cpu / n,
            "wall_s_per_answer": wall / n,
            "pairs_per_answer": (
                (pairs1 - pairs0) / n if pairs0 is not None and pairs1 is not None else None
            ),
            "embedded_per_answer": (
                (sum(c.texts for c in counters) - texts0) / n if counters else None
            ),
            "nli_share": nli_s / wall,
            "caps_hit": caps,
            "cpu_s": cpu,
            "wall_s": wall,
            "load_s": load_s,
        }
        print(
            f"  {name}: {n / wall:.2f} answers/s, {cpu / n:.3f} CPU s/answer",
            file=sys.stderr,
            flush=True,
        )
    return out


def _in_fresh_process(payload: Payload, batch_size: int) -> dict[str, dict[str, Any]]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure, payload, batch_size).result()


# ----------------------------------------------------------------------------- variants


def build_variants(
    args: argparse.Namespace, events: Sequence[AnswerEvent]
) -> tuple[list[Variant], list[str]]:
    """The variants to judge, and notes on how the answers were chosen."""
    granularity = Settings().judge.granularity
    by_task: dict[str, list[AnswerEvent]] = {}
    for event in events:
        by_task.setdefault(task_type_of(event), []).append(event)
    pools = {task: sentence_pool(group) for task, group in by_task.items()}

    def donors_of(event: AnswerEvent) -> list[AnswerEvent]:
        return by_task[task_type_of(event)]

    variants: list[Variant] = []
    notes: list[str] = []
    plans: list[tuple[Traffic, list[int], list[int]]] = [
        ("QA-like", args.qa_lengths, []),
        ("RAGTruth-like", args.rag_lengths, args.claims),
    ]
    for traffic, lengths, counts in plans:
        chosen = select_traffic(events, task_type_of, traffic, args.answers, min(lengths))
        every = select_traffic(events, task_type_of, traffic, len(events))
        taken = {e.answer_id for e in chosen}
        last = max((i for i, e in enumerate(every) if e.answer_id in taken), default=-1)
        passed = [e for e in every[: last + 1] if e.answer_id not in taken]
        if len(chosen) < args.answers:
            notes.append(f"{traffic}: only {len(chosen)} answers fit (asked {args.answers}).")
        if passed:
            notes.append(
                f"{traffic}: {len(passed)} answer(s) passed over, their own evidence longer "
                f"than {min(lengths)} sentences."
            )
        variants.append(Variant(traffic, "as sent", None, tuple(chosen)))
        padding: dict[str, list[str]] = {}
        for task in TRAFFIC_TASKS[traffic]:
            mine = [e for e in chosen if task_type_of(e) == task]
            padding |= padding_pools(mine, pools.get(task, []), max(lengths), args.seed)
        variants += evidence_variants(traffic, chosen, padding, lengths)
        if counts:
            variants += claims_variants(traffic, chosen, donors_of, counts, args.seed, granularity)
    notes.append(
        "QA-like traffic has no claims axis: a QA answer is one short answer read together "
        "with its own question, so answers to different questions cannot be joined."
    )
    return variants, notes


def _result(variant: Variant) -> VariantResult:
    granularity = Settings().judge.granularity
    events = variant.events
    return VariantResult(
        traffic=variant.traffic,
        axis=variant.axis,
        level=variant.level,
        answers=len(events),
        evidence_sentences=statistics.fmean(len(evidence_sentences(e)) for e in events),
        evidence_chars=statistics.fmean(sum(map(len, evidence_sentences(e))) for e in events),
        claims=statistics.fmean(len(checked_claims(e, granularity)) for e in events),
    )


# ------------------------------------------------------------------------------- report


def _header(args: argparse.Namespace, host: dict[str, Any], sample: str) -> list[str]:
    settings = Settings()
    judge = _judge_settings()
    inference = judge.inference
    return [
        "### What the judge costs per answer: evidence length and claims per answer",
        "",
        f"- Command: `{command_line()}`",
        f"- When: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: "
        f"{host['system']}, nproc {host['nproc']}, {host['cpu_model']}, Python "
        f"{host['python']}, onnxruntime {host['onnxruntime'] or 'not installed'}.",
        f"- Judge: `{judge.name}` ({judge.granularity} claims, calibrator "
        f"{judge.calibrator or 'off'}); ONNX threads intra {inference.intra_op_threads} / "
        f"inter {inference.inter_op_threads}, NLI batch {inference.nli_batch_size} x "
        f"{inference.nli_parallel_calls} calls at once; **embedding cache off** "
        "(embedding_cache_entries=0) so repeated evidence sentences are not free; each "
        f"variant's {args.answers} answers judged in micro-batches of at most "
        f"{settings.worker.batch_max} (worker.batch_max).",
        f"- Events drawn from {sample}; {args.answers} answers per variant; padding and "
        f"donor sentences from the drawn answers of the same task type; seed {args.seed}.",
        f"- Runs: {args.runs}, each a fresh process judging every variant after one untimed "
        "warm-up answer; medians (range over runs in brackets). CPU s = process CPU time "
        "(time.process_time(), all threads) over the judge_batch calls; cores per 100 "
        "answers/s = 100 x CPU s per answer. How variants are built: bench/cost.py "
        "docstring.",
    ]


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"positive integers separated by commas, not {text!r}")
    return sorted(set(values))


def main(argv: Sequence[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m bench cost", description=doc.splitlines()[0])
    parser.add_argument("--answers", type=int, default=12, help="answers per variant")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (medians)")
    parser.add_argument("--qa-lengths", type=_ints, default=[5, 20, 80], metavar="N,N,N")
    parser.add_argument("--rag-lengths", type=_ints, default=[100, 200, 300], metavar="N,N,N")
    parser.add_argument("--claims", type=_ints, default=[1, 4, 16], metavar="K,K,K")
    parser.add_argument("--seed", type=int, default=20250611)
    parser.add_argument("--pool", type=int, default=1000, help="answers per task to draw from")
    parser.add_argument("--data", type=Path, action="append", metavar="FILE")
    parser.add_argument("--out", type=Path, metavar="FILE.md", help="also write markdown here")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the numbers here")
    args = parser.parse_args(argv)
    if min(args.answers, args.runs, args.pool) < 1:
        parser.error("--answers, --runs and --pool must be 1 or more")
    if args.pool < args.answers:
        parser.error("--pool must be at least --answers")

    events, drawn = sample_events(args.data, args.pool)
    sample = drawn.split(", judged in")[0]  # its judging order is not ours (variants are)
    print(f"building variants from {sample} ...", file=sys.stderr, flush=True)
    variants, notes = build_variants(args, events)
    results = {v.name: _result(v) for v in variants}
    payload: Payload = [(v.name, [e.model_dump_json() for e in v.events]) for v in variants]
    batch_size = Settings().worker.batch_max
    total = sum(len(lines) for _, lines in payload)
    for run in range(args.runs):
        order = payload if run % 2 == 0 else payload[::-1]
        print(
            f"run {run + 1}/{args.runs}: {len(payload)} variants, {total} answers ...",
            file=sys.stderr,
            flush=True,
        )
        for name, numbers in _in_fresh_process(order, batch_size).items():
            results[name].runs.append(numbers)
    host = machine_info()
    section = render_markdown(list(results.values()), _header(args, host, sample), notes)
    print(section)
    if args.out:
        args.out.write_text(section, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    if args.json:
        args.json.write_text(_as_json(args, host, sample, results, notes), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _as_json(
    args: argparse.Namespace,
    host: dict[str, Any],
    sample: str,
    results: dict[str, VariantResult],
    notes: Sequence[str],
) -> str:
    variants = []
    for name, result in results.items():
        row = asdict(result)
        keys = sorted({k for r in result.runs for k in r})
        row["name"] = name
        row["median"] = {k: median_of(result.runs, k) for k in keys}
        cpu = row["median"].get("cpu_s_per_answer")
        row["cores_per_100_answers_per_s"] = None if cpu is None else cores_per_100(cpu)
        variants.append(row)
    document = {
        "command": command_line(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": host,
        "judge": _judge_settings().model_dump(mode="json"),
        "batch_size": Settings().worker.batch_max,
        "sample": sample,
        "args": vars(args),
        "traffic_tasks": {k: list(v) for k, v in TRAFFIC_TASKS.items()},
        "variants": variants,
        "notes": list(notes),
    }
    return json.dumps(document, indent=2, default=str) + "\n"
