"""Answer length alone against the labels, and the judge's accuracy with length held fixed.

Why: in HaluEval QA the right answers are mostly bare entities (one to three words) and
the hallucinated ones mostly sentences, so "more than k words = hallucinated" separates
them without reading the evidence. A judge's raw balanced accuracy there does not show
that it checks grounding; these figures do.

1. **Length rule.** Per task type, the balanced accuracy of "words > k = hallucinated"
   on the calibrate split and on ``--split``, for k = 1..10 (tasks whose calibrate
   answers have a median above 10 words: k = the 10th..90th percentiles of those word
   counts). The k quoted is the best on the calibrate split (the smallest on a tie); it
   is never chosen on the report split.
2. **Length-matched judge** (needs ``--dump`` from ``streamproc eval benchmark --dump``,
   with the same or a wider split). Answers are grouped by word count - one group per
   count up to 12 words, above that groups about 10 % wide (floor of log base 1.1); in
   each group that holds both labels the judge's balanced accuracy is taken, and the
   groups are averaged weighted by min(hallucinated, faithful): the number of
   hallucinated / faithful pairs of about equal length the group can form. Inside a
   group the length rule is nearly constant, so it scores about 0.5 there. Also the
   judge's balanced accuracy on the rows of the data's own pairs (HaluEval: the right
   and the hallucinated answer of one question) whose two answers have exactly the same
   word count, and on the answers the chosen length rule gets wrong (hallucinated ones
   of at most k words, faithful ones of more).

Words are ``answer.split()``; splits are ``streamproc.evaluate.splits.split_of``.

    .venv/bin/python scripts/length_baseline.py
    .venv/bin/python scripts/length_baseline.py --data ../shared/data/halueval_qa_dev.jsonl \\
        --split report --dump /tmp/dump.jsonl --json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamproc.evaluate.benchmark import default_data_files  # noqa: E402
from streamproc.evaluate.loaders import json_rows  # noqa: E402
from streamproc.evaluate.splits import split_key, split_of  # noqa: E402

SHORT = range(1, 11)
"""Thresholds k for short answers; longer tasks use deciles of their calibrate lengths."""
SEED, RESAMPLES = 20250106, 1000  # the benchmark's bootstrap seed and resample count
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Row:
    """One labelled answer: what the length rule and the strata need."""

    row_id: str
    task: str
    split: str
    words: int
    hallucinated: bool


def load_rows(paths: Iterable[Path]) -> list[Row]:
    """Labelled rows of benchmark JSONL files (rows without ``response_label`` skipped)."""
    rows: list[Row] = []
    for path in paths:
        for _, raw in json_rows(path):
            label = raw.get("response_label")
            if label not in ("hallucinated", "faithful"):
                continue
            row_id = str(raw["id"])
            words = len(str(raw.get("answer") or "").split())
            task = str(raw.get("task_type") or "QA")
            rows.append(Row(row_id, task, split_of(row_id), words, label == "hallucinated"))
    return rows


def balanced_accuracy(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Mean of recall on each class for (label, predicted) pairs; None without both."""
    positives = [predicted for label, predicted in pairs if label]
    negatives = [not predicted for label, predicted in pairs if not label]
    if not positives or not negatives:
        return None
    return (sum(positives) / len(positives) + sum(negatives) / len(negatives)) / 2


def thresholds(tuned: Sequence[Row]) -> list[int]:
    """1..10 words, or the 10th..90th percentiles of the calibrate lengths when their
    median is above 10 words."""
    words = sorted(row.words for row in tuned)
    if not words or words[len(words) // 2] <= max(SHORT):
        return list(SHORT)
    return sorted({words[len(words) * decile // 10] for decile in range(1, 10)})


def stratum(words: int) -> int:
    """Word counts within about 10 % of each other share a stratum (exact up to 12)."""
    return int(math.log(words) / math.log(1.1)) if words > 0 else -1


def length_rule(rows: Sequence[Row], split: str) -> dict[str, Any]:
    """Per k the rule's balanced accuracy on calibrate and on ``split``; k chosen on
    calibrate."""
    tuned = [row for row in rows if row.split == "calibrate"]
    quoted = [row for row in rows if split == "all" or row.split == split]
    table = [
        (
            k,
            balanced_accuracy([(r.hallucinated, r.words > k) for r in tuned]),
            balanced_accuracy([(r.hallucinated, r.words > k) for r in quoted]),
        )
        for k in thresholds(tuned)
    ]
    scored = [(on_tuned, -k, on_quoted) for k, on_tuned, on_quoted in table if on_tuned is not None]
    best = max(scored, default=None)  # the best on calibrate, the smallest k on a tie
    return {
        "thresholds": [{"k": k, "calibrate": c, "quoted": q} for k, c, q in table],
        "chosen_k": None if best is None else -best[1],
        "balanced_accuracy": None if best is None else best[2],
    }


@dataclass(frozen=True, slots=True)
class Stratified:
    """The judge's balanced accuracy averaged over word-count strata with both labels."""

    balanced_accuracy: float | None
    strata: int
    answers: int
    weight: int


def stratified(rows: Sequence[Row], predicted: dict[str, bool]) -> Stratified:
    """Per-stratum balanced accuracy, weighted by min(hallucinated, faithful)."""
    strata: defaultdict[int, list[Row]] = defaultdict(list)
    for row in rows:
        strata[stratum(row.words)].append(row)
    total = 0.0
    used = answers = weight = 0
    for members in strata.values():
        positives = sum(row.hallucinated for row in members)
        pairs = min(positives, len(members) - positives)
        score = balanced_accuracy([(r.hallucinated, predicted[r.row_id]) for r in members])
        if score is None or pairs == 0:
            continue
        total, weight = total + score * pairs, weight + pairs
        used, answers = used + 1, answers + len(members)
    return Stratified(total / weight if weight else None, used, answers, weight)


def equal_length_pairs(rows: Sequence[Row]) -> list[tuple[Row, Row]]:
    """The data's own pairs (one split key, one answer per label) of equal word count."""
    groups: defaultdict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[split_key(row.row_id)].append(row)
    return [
        (first, second)
        for first, second in (members for members in groups.values() if len(members) == 2)
        if first.hallucinated != second.hallucinated and first.words == second.words
    ]


def interval(
    units: Sequence[T], statistic: Callable[[Sequence[T]], float | None]
) -> list[float] | None:
    """95 % percentile bootstrap of ``statistic`` over resampled ``units``."""
    rng = random.Random(SEED)
    values = sorted(
        value
        for _ in range(RESAMPLES)
        if (value := statistic(rng.choices(units, k=len(units)))) is not None
    )
    if len(values) < RESAMPLES // 2:
        return None
    return [values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]]


def length_matched(rows: Sequence[Row], predicted: dict[str, bool]) -> dict[str, Any]:
    """The judge's balanced accuracy raw, within word-count strata, and on equal-length
    pairs, with bootstrap intervals (answers resampled; pairs resampled as pairs)."""
    judged = [row for row in rows if row.row_id in predicted]

    def raw(sample: Sequence[Row]) -> float | None:
        return balanced_accuracy([(r.hallucinated, predicted[r.row_id]) for r in sample])

    def within(sample: Sequence[Row]) -> float | None:
        return stratified(sample, predicted).balanced_accuracy

    def paired(sample: Sequence[tuple[Row, Row]]) -> float | None:
        return raw([row for pair in sample for row in pair])

    strat = stratified(judged, predicted)
    pairs = equal_length_pairs(judged)
    return {
        "answers": len(judged),
        "balanced_accuracy": raw(judged),
        "balanced_accuracy_ci": interval(judged, raw),
        "stratified": {
            "balanced_accuracy": strat.balanced_accuracy,
            "balanced_accuracy_ci": interval(judged, within),
            "strata": strat.strata,
            "answers": strat.answers,
            "pairs_weight": strat.weight,
        },
        "equal_length_pairs": {
            "pairs": len(pairs),
            "balanced_accuracy": paired(pairs),
            "balanced_accuracy_ci": interval(pairs, paired) if pairs else None,
        },
    }


def where_length_errs(rows: Sequence[Row], predicted: dict[str, bool], k: int) -> dict[str, Any]:
    """The judge on the answers the length rule gets wrong: hallucinated ones of at most
    k words and faithful ones of more."""
    wrong = [r for r in rows if r.row_id in predicted and (r.words > k) != r.hallucinated]
    hallucinated = [r for r in wrong if r.hallucinated]
    faithful = [r for r in wrong if not r.hallucinated]
    return {
        "hallucinated": len(hallucinated),
        "caught": sum(predicted[r.row_id] for r in hallucinated),
        "faithful": len(faithful),
        "flagged": sum(predicted[r.row_id] for r in faithful),
        "balanced_accuracy": balanced_accuracy(
            [(r.hallucinated, predicted[r.row_id]) for r in wrong]
        ),
    }


def load_dump(path: Path) -> dict[str, bool]:
    """Answer id -> the judge's answer-level call (True = hallucinated)."""
    return {str(raw["id"]): bool(raw["predicted"]) for _, raw in json_rows(path)}


def report(rows: Sequence[Row], split: str, predicted: dict[str, bool] | None) -> dict[str, Any]:
    """The length rule and, given a dump, the judge's figures, per task type of ``rows``."""
    out: dict[str, Any] = {"split": split, "tasks": {}}
    for task in sorted({row.task for row in rows}):
        of_task = [row for row in rows if row.task == task]
        quoted = [row for row in of_task if split == "all" or row.split == split]
        entry: dict[str, Any] = {
            "rows": len(quoted),
            "hallucinated": sum(row.hallucinated for row in quoted),
            "length_rule": length_rule(of_task, split),
        }
        if predicted is not None:
            entry["judge"] = length_matched(quoted, predicted)
            if entry["length_rule"]["chosen_k"] is not None:
                k = entry["length_rule"]["chosen_k"]
                entry["judge"]["where_length_errs"] = where_length_errs(quoted, predicted, k)
        out["tasks"][task] = entry
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ci(entry: dict[str, Any], key: str) -> str:
    bounds = entry.get(f"{key}_ci")
    ci = "" if bounds is None else f" [{bounds[0]:.3f}, {bounds[1]:.3f}]"
    return _fmt(entry[key]) + ci


def render(result: dict[str, Any]) -> str:
    """Plain text of ``report``'s result."""
    split = result["split"]
    lines = []
    for task, entry in result["tasks"].items():
        rule = entry["length_rule"]
        lines.append(
            f"{task}: {entry['rows']} {split} answers, {entry['hallucinated']} hallucinated"
        )
        lines.append(f"  words > k = hallucinated   k: calibrate / {split}")
        for row in rule["thresholds"]:
            lines.append(f"    k={row['k']:>2}: {_fmt(row['calibrate'])} / {_fmt(row['quoted'])}")
        lines.append(
            f"  length rule, k={rule['chosen_k']} chosen on calibrate: "
            f"{_fmt(rule['balanced_accuracy'])} on {split}"
        )
        judge = entry.get("judge")
        if judge is not None:
            strat, pairs = judge["stratified"], judge["equal_length_pairs"]
            lines.append(
                f"  judge, {judge['answers']} answers in the dump: "
                f"{_ci(judge, 'balanced_accuracy')} raw"
            )
            lines.append(
                f"  judge within word-count strata: {_ci(strat, 'balanced_accuracy')} "
                f"({strat['strata']} strata with both labels, {strat['answers']} answers, "
                f"weight {strat['pairs_weight']} pairs)"
            )
            lines.append(
                f"  judge on {pairs['pairs']} equal-length pairs: {_ci(pairs, 'balanced_accuracy')}"
            )
            errs = judge.get("where_length_errs")
            if errs is not None:
                lines.append(
                    f"  judge where the length rule errs: {_fmt(errs['balanced_accuracy'])} "
                    f"({errs['caught']} of {errs['hallucinated']} short hallucinated answers "
                    f"caught, {errs['flagged']} of {errs['faithful']} long faithful ones flagged)"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help="benchmark JSONL, repeatable (default: both dev files in ../shared/data)",
    )
    parser.add_argument("--split", choices=("calibrate", "report", "all"), default="report")
    parser.add_argument("--dump", type=Path, help="per-answer dump of `eval benchmark --dump`")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    rows = load_rows(args.data or default_data_files())
    predicted = load_dump(args.dump) if args.dump is not None else None
    result = report(rows, args.split, predicted)
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
