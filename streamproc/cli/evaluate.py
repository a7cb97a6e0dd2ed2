"""``streamproc eval check|agree|score|benchmark``: the offline reports, in the main
command; and ``streamproc calibrate --from-labels``: the answer calibrator refit on
labelled answers.

``streamproc/cli/main.py`` calls :func:`register` and then ``args.func(args)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from streamproc.config import Settings
from streamproc.evaluate.benchmark_command import add_benchmark_arguments, run_benchmark
from streamproc.evaluate.cases import LabelMismatch
from streamproc.evaluate.loaders import LoadError, default_cases, load_cases
from streamproc.evaluate.metrics import agreement, scores
from streamproc.evaluate.reports import Rendered, render_agree, render_check, render_score
from streamproc.evaluate.runner import judge_cases
from streamproc.inference.options import JudgeSettings
from streamproc.wiring import available_judges, refit_options

__all__ = ["register", "run_calibrate_command", "run_eval"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``eval`` subcommand: one parser per report, so each ``--help`` shows only
    the options that report takes."""
    parser = subparsers.add_parser(
        "eval",
        help="offline evaluation on labelled answers: check | agree | score | benchmark",
        description="Run the judge over labelled answers and compare it with people. "
        "'streamproc eval REPORT --help' lists a report's options.",
    )
    reports = parser.add_subparsers(dest="what", metavar="REPORT", required=True)

    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--judge", choices=available_judges(), default="rules")
    shared.add_argument(
        "--granularity",
        choices=["sentence", "atomic"],
        help="claim granularity (claim-labelled cases are always judged per sentence)",
    )
    shared.add_argument(
        "--output",
        "-o",
        dest="report",
        type=Path,
        metavar="FILE.md",
        help="also write the report as markdown here",
    )
    cases = argparse.ArgumentParser(add_help=False)
    cases.add_argument(
        "--cases",
        type=Path,
        help="AnswerEvent JSONL with labels, a data/ benchmark JSONL, or lab seed_cases.jsonl "
        "(default: the in-repo seed-lab sample)",
    )
    cases.add_argument(
        "--notes", type=Path, help="lab notes (default: seed_notes.json beside --cases)"
    )

    for name, about in (
        ("check", "per-claim verdicts beside people's labels"),
        ("agree", "the judge against people: agreement per claim and per answer"),
        ("score", "the score report: faithfulness, hallucination rate, citations"),
    ):
        report = reports.add_parser(name, parents=[shared, cases], help=about, description=about)
        if name == "score":
            report.add_argument(
                "--penalty",
                type=float,
                default=1.0,
                help="points lost per wrong answer (default 1)",
            )
    benchmark = reports.add_parser(
        "benchmark",
        parents=[shared],
        help="metrics with intervals on the benchmark files",
        description="The judge against third-party labels (RAGTruth, HaluEval, agent "
        "cases), with bootstrap intervals.",
    )
    add_benchmark_arguments(benchmark)
    parser.set_defaults(func=run_eval)
    _register_calibrate(subparsers)


def _register_calibrate(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``calibrate`` subcommand (the answer thresholds from people's labels)."""
    from streamproc.evaluate.calibration.label_refit import add_calibrate_arguments

    parser = subparsers.add_parser(
        "calibrate",
        help="refit the answer calibrator's thresholds per task type on labelled answers",
        description="Judge labelled answers with the configured judge and refit the answer "
        "thresholds per regime for a target precision (hard findings only where none "
        "reaches it); writes a new versioned answer calibrator and reports before / after "
        "on the labelled rows it did not fit.",
    )
    add_calibrate_arguments(parser)
    parser.set_defaults(func=run_calibrate_command)


def run_calibrate_command(args: argparse.Namespace) -> int:
    from streamproc.evaluate.calibration.label_refit import run_calibrate

    return run_calibrate(args, refit_options(Settings()))


def _settings(args: argparse.Namespace) -> JudgeSettings:
    base = Settings().judge
    update = {"name": args.judge}
    if args.granularity:
        update["granularity"] = args.granularity
    return JudgeSettings.model_validate({**base.model_dump(), **update})


def run_eval(args: argparse.Namespace) -> int:
    """Run one report; 0 on success, 2 when the input cannot be used (message on stderr)."""
    if args.what == "benchmark":
        return run_benchmark(args, _settings(args), batch_max=Settings().worker.batch_max)
    penalty: float = getattr(args, "penalty", 1.0)  # score only
    if penalty < 0:
        print("--penalty must be 0 or more", file=sys.stderr)
        return 2
    try:
        cases = load_cases(args.cases or default_cases(), args.notes)
        results, infos = judge_cases(cases, _settings(args))
    except (LoadError, LabelMismatch, ValidationError) as error:
        print(f"streamproc eval: {error}", file=sys.stderr)
        return 2
    rendered: Rendered
    if args.what == "check":
        rendered = render_check(results, infos)
    elif args.what == "agree":
        rendered = render_agree(agreement(results), infos)
    else:
        rendered = render_score(scores(results, penalty), infos)
    print(rendered.text)
    if args.report:
        args.report.write_text(rendered.markdown, encoding="utf-8")
        print(f"\nSaved the report to {args.report}")
    return 0
