"""Fit the calibrators' part for answers about a customer's case, on the calibrate split.

The case regime (records with fields, tool results: :data:`~streamproc.judge.decision.
calibrator.CASE_REGIME`) had no part of its own: a calibrator read it with its ``record``
part, fitted on data-to-text listings. This script judges the calibrate split of the
agent set (``datasets/agent_cases``) with a base claim calibrator and chooses, for the
case regime only:

- the claim threshold: the one with the best answer-level balanced accuracy among those
  that flag at most ``--max-faithful`` of the faithful answers (ties: the higher one);
  above every risk seen when the calibrated claims add nothing to the record checks;
- whether the answer calibrator decides the regime from hard findings alone
  (``hard_only_regimes``): when that is at least as accurate.

It writes a new claim calibrator (the base's parts for the other regimes, unchanged,
plus a ``case`` part: the base's record weights with the chosen threshold) and a new
answer calibrator fitted to it, each with its manifest and sha256. Other regimes judge
exactly as before. Reproducible:

    .venv/bin/python modelwork/fit_case_regime.py [--dry-run]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

# Imported after the path is set, for the reason above.
from streamproc.config import Settings  # noqa: E402
from streamproc.contracts.events import AnswerJudgement, VerdictLabel  # noqa: E402
from streamproc.evaluate.benchmark import load_items  # noqa: E402
from streamproc.evaluate.splits import SPLIT_DESCRIPTION  # noqa: E402
from streamproc.judge.decision.calibrator import CASE_REGIME, regime_of  # noqa: E402
from streamproc.judge.decision.hard_findings import has_hard_finding  # noqa: E402
from streamproc.wiring import build_nli_judge  # noqa: E402

MODELS = ROOT / "models" / "calibrators"
DATA = ROOT / "datasets" / "agent_cases" / "agent_cases.jsonl"
NEVER = 0.9999  # a threshold no calibrated risk of the calibrate split reached


@dataclass(frozen=True, slots=True)
class Answer:
    label: bool
    hard: bool
    risks: tuple[float, ...]


def _answers(judgements: list[AnswerJudgement], labels: list[bool]) -> list[Answer]:
    out = []
    for judgement, label in zip(judgements, labels, strict=True):
        risks = tuple(
            c.risk
            for c in judgement.claims
            if c.risk is not None and c.signals and regime_of(c.signals) == CASE_REGIME
        )
        hard = any(has_hard_finding(c) for c in judgement.claims) or any(
            c.verdict is VerdictLabel.CONTRADICTED and c.risk is None for c in judgement.claims
        )
        out.append(Answer(label, hard, risks))
    return out


def _rates(answers: list[Answer], threshold: float | None) -> tuple[float, float]:
    """(balanced accuracy, share of faithful answers flagged); None: hard findings only."""
    tp = fp = fn = tn = 0
    for a in answers:
        flagged = a.hard or (threshold is not None and any(r >= threshold for r in a.risks))
        tp += a.label and flagged
        fn += a.label and not flagged
        fp += (not a.label) and flagged
        tn += (not a.label) and not flagged
    sensitivity = tp / (tp + fn) if tp + fn else 0.0
    specificity = tn / (tn + fp) if tn + fp else 0.0
    return (sensitivity + specificity) / 2, fp / (fp + tn) if fp + tn else 0.0


def choose(answers: list[Answer], max_faithful: float) -> tuple[float, float, float, bool]:
    """(claim threshold, its balanced accuracy, its faithful share, hard-only at least as
    good) for the case regime."""
    risks = sorted({r for a in answers for r in a.risks})
    candidates = [r for r in risks if r < NEVER] + [NEVER]
    best: tuple[float, float, float] | None = None
    for threshold in candidates:
        accuracy, faithful = _rates(answers, threshold)
        if faithful > max_faithful:
            continue
        if best is None or accuracy > best[1] or (accuracy == best[1] and threshold > best[0]):
            best = (threshold, accuracy, faithful)
    if best is None:
        best = (NEVER, *_rates(answers, NEVER))
    hard_only_accuracy, _ = _rates(answers, None)
    return best[0], best[1], best[2], hard_only_accuracy >= best[1]


def _write(path: Path, payload: dict[str, Any]) -> str:
    text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
    path.write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _manifest(path: Path, fields: dict[str, Any], tables: dict[str, dict[str, Any]]) -> None:
    lines = [f"# Written by modelwork/fit_case_regime.py on {datetime.now(UTC).date()}."]
    lines += [f"{key} = {_toml_value(value)}" for key, value in fields.items()]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--base", default="verdict-calibrator-verifier-v2")
    parser.add_argument("--base-answer", default="answer-calibrator-v1")
    parser.add_argument("--name", default="verdict-calibrator-verifier-v3")
    parser.add_argument("--answer-name", default="answer-calibrator-v2")
    parser.add_argument("--max-faithful", type=float, default=0.05)
    parser.add_argument("--dry-run", action="store_true", help="print the choice, write nothing")
    args = parser.parse_args(argv)

    # The judge as configured (STREAMPROC_* variables: the NLI model the base was fitted
    # with), with the base calibrators.
    settings = Settings().judge.model_copy(
        update={"calibrator": args.base, "answer_calibrator": args.base_answer}
    )
    judge = build_nli_judge(settings)
    items = load_items([args.data], "calibrate")
    judgements = judge.judge_batch([item.case.event for item in items])
    labels = [bool(item.label) for item in items]
    answers = _answers(judgements, labels)
    threshold, accuracy, faithful, hard_only = choose(answers, args.max_faithful)
    calibrated_accuracy, calibrated_faithful = _rates(answers, 0.18)
    report = {
        "answers": len(answers),
        "threshold": threshold,
        "balanced_accuracy": round(accuracy, 4),
        "faithful_flagged": round(faithful, 4),
        "hard_only": hard_only,
        "with_record_threshold_0.18": {
            "balanced_accuracy": round(calibrated_accuracy, 4),
            "faithful_flagged": round(calibrated_faithful, 4),
        },
    }
    print(json.dumps(report, indent=2))
    if args.dry_run:
        return 0

    base = json.loads((MODELS / f"{args.base}.json").read_text(encoding="utf-8"))
    claim = copy.deepcopy(base)
    claim["name"] = args.name
    claim["regimes"][CASE_REGIME] = {**base["regimes"]["record"], "threshold": threshold}
    claim_sha = _write(MODELS / f"{args.name}.json", claim)
    answer_base = json.loads((MODELS / f"{args.base_answer}.json").read_text(encoding="utf-8"))
    answer = copy.deepcopy(answer_base)
    answer["name"] = args.answer_name
    answer["claim_calibrator"] = args.name
    answer["regimes"][CASE_REGIME] = dict(answer_base["regimes"]["record"])
    answer["hard_only_regimes"] = sorted(
        {*answer_base.get("hard_only_regimes", []), *([CASE_REGIME] if hard_only else [])}
    )
    answer_sha = _write(MODELS / f"{args.answer_name}.json", answer)

    thresholds = {r: p["threshold"] for r, p in sorted(claim["regimes"].items())}
    training = {
        "split": SPLIT_DESCRIPTION,
        "data": [
            f"{args.base}: its parts for the other regimes, unchanged",
            "datasets/agent_cases/agent_cases.jsonl, calibrate split (written for the "
            "project, Apache-2.0): the case regime's threshold",
        ],
        "answers": len(answers),
    }
    _manifest(
        MODELS / f"{args.name}.toml",
        {
            "name": args.name,
            "kind": "logistic_regression_per_regime",
            "description": f"{args.base} with a part for answers about a customer's case "
            "(records with fields, tool results): its record weights, with a threshold "
            "chosen on the agent set's calibrate split.",
            "licence": "MIT and Apache-2.0 training data (HaluEval, RAGTruth; the project's "
            "agent set)",
            "features": list(claim["features"]),
            "feature_set": "claim-signals",
            "thresholds": thresholds,
            "nli_model": claim.get("nli_model", ""),
            "embedding_model": claim.get("embedding_model", ""),
        },
        {
            "weights": {"path": f"{args.name}.json", "sha256": claim_sha},
            "training": training,
            "metrics": {
                "case_answers": len(answers),
                "case_balanced_accuracy": report["balanced_accuracy"],
                "case_faithful_flagged": report["faithful_flagged"],
                "case_with_record_threshold_balanced_accuracy": calibrated_accuracy,
                "case_with_record_threshold_faithful_flagged": calibrated_faithful,
            },
        },
    )
    _manifest(
        MODELS / f"{args.answer_name}.toml",
        {
            "name": args.answer_name,
            "kind": "answer_logistic_regression_per_regime",
            "description": f"{args.base_answer} refitted to {args.name}: the case regime "
            + ("decided by hard findings alone" if hard_only else "with the record part"),
            "licence": "MIT and Apache-2.0 training data (HaluEval, RAGTruth; the project's "
            "agent set)",
            "features": list(answer["features"]),
            "claim_calibrator": args.name,
            "thresholds": {r: p["threshold"] for r, p in sorted(answer["regimes"].items())},
            "hard_only_regimes": answer["hard_only_regimes"],
        },
        {
            "weights": {"path": f"{args.answer_name}.json", "sha256": answer_sha},
            "training": training,
        },
    )
    print(f"wrote {args.name} and {args.answer_name} in {MODELS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
