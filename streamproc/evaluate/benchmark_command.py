"""``streamproc eval benchmark``'s options and run: the files, the judge, the report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from streamproc.evaluate.benchmark import (
    DEFAULT_BATCH_MAX,
    BenchmarkResult,
    benchmark_json,
    default_data_files,
    dump_rows,
    evaluate,
    judge_items,
    load_items,
    render_benchmark,
)
from streamproc.evaluate.confusion import DEFAULT_RESAMPLES, DEFAULT_SEED
from streamproc.evaluate.loaders import LoadError
from streamproc.inference.judges import build_judge
from streamproc.inference.options import JudgeSettings
from streamproc.judge import Judge

__all__ = ["add_benchmark_arguments", "run_benchmark"]


def add_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``eval benchmark`` (``--judge``, ``--granularity`` and ``--output`` are
    shared with the other ``eval`` reports)."""
    group = parser.add_argument_group("benchmark")
    group.add_argument(
        "--data",
        type=Path,
        action="append",
        metavar="FILE",
        help="benchmark JSONL, repeatable (default: both dev files in ../shared/data)",
    )
    group.add_argument(
        "--split",
        choices=["calibrate", "report", "all"],
        default="report",
        help="rows of the fixed split (streamproc/evaluate/splits.py; default: report)",
    )
    group.add_argument("--limit", type=int, metavar="N", help="at most N answers per file")
    group.add_argument("--json", action="store_true", help="print one JSON object")
    group.add_argument(
        "--batch-size", type=int, metavar="N", help="answers per judge call (default: worker's)"
    )
    group.add_argument(
        "--dump", type=Path, metavar="FILE.jsonl", help="per-answer, per-claim rows for tuning"
    )
    group.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})"
    )
    group.add_argument(
        "--resamples",
        type=int,
        metavar="N",
        default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})",
    )


def _data_files(given: Sequence[Path] | None) -> list[Path]:
    if given:
        missing = [p for p in given if not p.is_file()]
        if missing:
            raise LoadError(f"no such file: {', '.join(map(str, missing))}")
        return list(given)
    files = default_data_files()
    missing = [p for p in files if not p.is_file()]
    if missing:
        raise LoadError(
            f"no --data given and the default benchmark files are missing "
            f"({', '.join(map(str, missing))}); pass --data FILE (RAGTruth / HaluEval JSONL "
            "or AnswerEvent JSONL with labels)"
        )
    return files


def run_benchmark(
    args: argparse.Namespace,
    settings: JudgeSettings,
    out: TextIO | None = None,
    err: TextIO | None = None,
    build: Callable[[JudgeSettings], Judge] = build_judge,
    *,
    batch_max: int = DEFAULT_BATCH_MAX,
) -> int:
    """Run the benchmark; 0 on success, 2 when the input or judge cannot be used.

    ``out``/``err`` default to the *current* sys.stdout/stderr (read at call time, so
    captured output in tests works); ``build`` is the judge factory (a fake in tests);
    ``batch_max``: the batch size without ``--batch-size`` (the entry point passes
    ``worker.batch_max``).
    """
    out, err = out or sys.stdout, err or sys.stderr
    batch_size = args.batch_size or batch_max
    if batch_size < 1 or (args.limit is not None and args.limit < 1) or args.resamples < 1:
        print("streamproc eval: --batch-size, --limit and --resamples must be 1 or more", file=err)
        return 2
    counts: Counter[tuple[str, str, str]] = Counter()
    try:
        files = _data_files(args.data)
        items = load_items(files, args.split, args.limit, counts)
        started = time.perf_counter()
        judge = build(settings)
        load_s = time.perf_counter() - started
    except (LoadError, ValueError, ImportError, OSError) as error:
        print(f"streamproc eval: {error}", file=err)
        return 2
    if not items:
        print(f"streamproc eval: no answers in split {args.split!r} of the given files", file=err)
        return 2
    judgements, elapsed = judge_items(items, judge, batch_size, progress=err)
    result = BenchmarkResult(
        split=args.split,
        judge=judge.info,
        granularity=settings.granularity,
        batch_size=batch_size,
        files=files,
        split_counts=counts,
        metrics=evaluate(items, judgements, resamples=args.resamples, seed=args.seed),
        load_s=load_s,
        elapsed_s=elapsed,
        resamples=args.resamples,
        seed=args.seed,
    )
    if args.dump:
        rows = dump_rows(items, judgements, judge.info)
        with args.dump.open("w", encoding="utf-8") as sink:
            for row in rows:
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    if args.json:
        print(json.dumps(benchmark_json(result), indent=2), file=out)
    else:
        print(render_benchmark(result), file=out, end="")
    report: Path | None = getattr(args, "report", None)
    if report:
        report.write_text(render_benchmark(result, markdown=True), encoding="utf-8")
    return 0
