"""``streamproc eval benchmark``: the judge against third-party labels, with intervals.

Where ``agree`` and ``score`` reproduce the course lab, this measures the judge on the
labelled benchmarks of ``data/`` (RAGTruth, HaluEval QA): is an answer the judge calls
hallucinated one people call hallucinated? Numbers are per task type, because the
tasks fail differently, and each comes with a 95 % interval, because a few hundred
answers leave a wide one. Only the ``report`` half of the fixed split
(:mod:`streamproc.evaluate.splits`) should be quoted; ``calibrate`` is for tuning.

The intervals are those of :mod:`streamproc.evaluate.confusion`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TextIO

from pydantic import ValidationError

from streamproc.contracts.events import AnswerEvent, AnswerJudgement, JudgeInfo, VerdictLabel
from streamproc.evaluate.cases import LabelledCase, person_verdicts
from streamproc.evaluate.confusion import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    METRICS,
    BinaryReport,
    Confusion,
    binary_report,
    bootstrap_intervals,
)
from streamproc.evaluate.loaders import LoadError, benchmark_row_to_event, json_rows
from streamproc.evaluate.splits import SPLIT_DESCRIPTION, Split, split_of
from streamproc.judge import Judge
from streamproc.verdicts.options import WorkerSettings

__all__ = [
    "TASKS",
    "BenchmarkItem",
    "BenchmarkResult",
    "BinaryReport",
    "Confusion",
    "Evaluation",
    "benchmark_json",
    "binary_report",
    "bootstrap_intervals",
    "default_data_files",
    "dump_rows",
    "evaluate",
    "judge_items",
    "load_items",
    "render_benchmark",
    "task_type_of",
]

SplitChoice = Literal["calibrate", "report", "all"]
TASKS: Final = ("QA", "Summary", "Data2txt", "Agent")
DEFAULT_FILES: Final = ("ragtruth_dev.jsonl", "halueval_qa_dev.jsonl")
DEFAULT_BATCH_MAX: Final[int] = WorkerSettings.model_fields["batch_max"].default
"""``worker.batch_max``'s default: the batch size when neither ``--batch-size`` nor the
entry point says."""
_REPO = Path(__file__).resolve().parents[2]
_SPAN_DATASETS = ("ragtruth",)  # word-level human spans; HaluEval's span is the whole answer


# ------------------------------------------------------------------------------ loading


@dataclass(frozen=True, slots=True)
class BenchmarkItem:
    """One labelled answer, with what the report groups it by."""

    row_id: str
    dataset: str
    task_type: str
    split: Split
    case: LabelledCase

    @property
    def label(self) -> bool | None:
        """People's answer-level call (``response_label``): True = hallucinated."""
        labels = self.case.event.labels
        if labels is None or labels.response is None:
            return None
        return labels.response == "hallucinated"

    @property
    def span_labelled(self) -> bool:
        """Word-level spans exist, so claim-level numbers mean something."""
        labels = self.case.event.labels
        has_spans = labels is not None and labels.spans is not None
        return has_spans and self.dataset.lower().startswith(_SPAN_DATASETS)


def default_data_files(repo: Path = _REPO) -> list[Path]:
    """Both dev files under ``<repo>/../shared/data`` (absent on a user's fresh clone)."""
    data = (repo / ".." / "shared" / "data").resolve()
    return [data / name for name in DEFAULT_FILES]


def task_type_of(event: AnswerEvent) -> str:
    """Task type of an AnswerEvent line, which lost the row's ``task_type`` field.

    The loader names benchmark assistants ``<dataset>-<task>``; anything else that
    carries a question is question answering.
    """
    suffix = event.assistant_id.rsplit("-", 1)[-1].lower()
    by_suffix = {task.lower(): task for task in TASKS}
    return by_suffix.get(suffix, "QA" if event.question else "other")


def _dataset_of(event: AnswerEvent) -> str:
    source = event.labels.source if event.labels else None
    return (source or event.assistant_id).split()[0].split("-")[0]


def _item(path: Path, number: int, row: dict[str, Any]) -> BenchmarkItem:
    origin = f"{path.name}:{number}"
    try:
        if "retrieved" in row:
            raise LoadError("lab-format case: use `streamproc eval agree --cases` for those")
        if "dataset" in row and "event_id" not in row:
            event = benchmark_row_to_event(row, number - 1)
            dataset, task = str(row["dataset"]), str(row.get("task_type") or "QA")
        else:
            event = AnswerEvent.model_validate(row)
            dataset, task = _dataset_of(event), task_type_of(event)
    except LoadError as error:
        raise LoadError(f"{origin}: {error}") from None
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        raise LoadError(f"{origin}: not a usable benchmark row ({error})") from None
    row_id = event.answer_id
    return BenchmarkItem(row_id, dataset, task, split_of(row_id), LabelledCase(event, origin))


def load_items(
    paths: Sequence[Path],
    split: SplitChoice = "report",
    limit: int | None = None,
    counts: Counter[tuple[str, str, str]] | None = None,
) -> list[BenchmarkItem]:
    """Rows of ``paths`` in file order: only ``split`` (unless "all"), at most ``limit``
    per file. ``counts`` (if given) receives (split, task, label) for *every* row read,
    so the report can show what both halves hold."""
    items: list[BenchmarkItem] = []
    for path in paths:
        taken = 0
        for number, row in json_rows(path):
            item = _item(path, number, row)
            if counts is not None:
                label = {True: "hallucinated", False: "faithful", None: "unlabelled"}[item.label]
                counts[(item.split, item.task_type, label)] += 1
            if (split != "all" and item.split != split) or (limit is not None and taken >= limit):
                continue
            items.append(item)
            taken += 1
    return items


# ------------------------------------------------------------------------------ judging


def judge_items(
    items: Sequence[BenchmarkItem],
    judge: Judge,
    batch_size: int,
    progress: TextIO | None = None,
    every: int = 200,
) -> tuple[list[AnswerJudgement], float]:
    """Judgements in input order and the judging wall time (s), in micro-batches as a
    worker would send them. A slow judge reports progress about every ``every`` answers."""
    judgements: list[AnswerJudgement] = []
    started = time.perf_counter()
    for at in range(0, len(items), batch_size):
        batch = [item.case.event for item in items[at : at + batch_size]]
        judgements += judge.judge_batch(batch)
        done = len(judgements)
        if progress is not None and (done // every > (done - len(batch)) // every):
            elapsed = time.perf_counter() - started
            print(
                f"judged {done}/{len(items)} answers in {elapsed:.1f} s "
                f"({done / elapsed:.1f} answers/s)",
                file=progress,
                flush=True,
            )
    return judgements, time.perf_counter() - started


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The numbers of one run: answer level overall and per task, and claim level on the
    span-labelled (RAGTruth) answers."""

    answers: BinaryReport
    per_task: dict[str, BinaryReport]
    claims: BinaryReport | None
    claims_per_task: dict[str, BinaryReport]
    spans: int
    uncovered_spans: int
    unlabelled: int
    no_checked_claims: int
    unverified: int = 0
    """Answers the judge could not check (``verified`` false, e.g. a language it was not
    measured on): in neither level's counts - an unverified answer is predicted neither
    faithful nor hallucinated, an unverified claim neither supported nor not."""


@dataclass(frozen=True, slots=True)
class BenchmarkResult:
    """Everything one run measured, with how; rendered as text, markdown or JSON."""

    split: SplitChoice
    judge: JudgeInfo
    granularity: str
    batch_size: int
    files: list[Path]
    split_counts: Counter[tuple[str, str, str]]
    metrics: Evaluation
    load_s: float
    elapsed_s: float
    resamples: int
    seed: int

    @property
    def judged(self) -> int:
        return self.metrics.answers.units + self.metrics.unlabelled

    @property
    def answers_per_s(self) -> float | None:
        return self.judged / self.elapsed_s if self.elapsed_s > 0 else None


def _claim_confusion(item: BenchmarkItem, judgement: AnswerJudgement) -> tuple[Confusion, int]:
    """The answer's checked claims against the spans: positive = not supported.
    Also how many labelled spans no checked claim overlaps."""
    person, uncovered = person_verdicts(item.case, judgement)
    total = Confusion()
    for claim, verdict in zip(judgement.claims, person, strict=True):
        if verdict is None or claim.verdict is None or claim.verdict is VerdictLabel.UNVERIFIED:
            continue
        total += Confusion.of(
            verdict is not VerdictLabel.SUPPORTED, claim.verdict is not VerdictLabel.SUPPORTED
        )
    return total, uncovered


def evaluate(
    items: Sequence[BenchmarkItem],
    judgements: Sequence[AnswerJudgement],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Evaluation:
    """Score ``judgements`` (in ``items`` order) against people's labels."""
    answers: dict[str, list[Confusion]] = {}
    claims: dict[str, list[Confusion]] = {}
    spans = uncovered = 0
    for item, judgement in zip(items, judgements, strict=True):
        if item.label is not None and judgement.verified:
            answers.setdefault(item.task_type, []).append(
                Confusion.of(item.label, judgement.hallucinated)
            )
        if item.span_labelled:
            unit, missed = _claim_confusion(item, judgement)
            claims.setdefault(item.task_type, []).append(unit)
            spans += len(item.case.spans or [])
            uncovered += missed

    def report(units: Sequence[Confusion], clustered: bool) -> BinaryReport:
        return binary_report(units, clustered=clustered, resamples=resamples, seed=seed)

    def every(groups: Mapping[str, list[Confusion]]) -> list[Confusion]:
        return [unit for task in _ordered(groups) for unit in groups[task]]

    return Evaluation(
        answers=report(every(answers), False),
        per_task={t: report(answers[t], False) for t in _ordered(answers)},
        claims=report(every(claims), True) if claims else None,
        claims_per_task={t: report(claims[t], True) for t in _ordered(claims)},
        spans=spans,
        uncovered_spans=uncovered,
        unlabelled=sum(item.label is None for item in items),
        no_checked_claims=sum(j.checked_claims == 0 and j.verified for j in judgements),
        unverified=sum(not j.verified for j in judgements),
    )


def _rank(task: str) -> tuple[int, str]:
    """QA, Summary, Data2txt first, in that order; anything else after, by name."""
    return (TASKS.index(task) if task in TASKS else len(TASKS), task)


def _ordered(tasks: Mapping[str, object]) -> list[str]:
    return sorted(tasks, key=_rank)


# ------------------------------------------------------------------------------ output


def _report_json(report: BinaryReport) -> dict[str, Any]:
    out: dict[str, Any] = {"n": report.counts.n, "positives": report.counts.positives}
    out.update(zip(("tp", "fp", "fn", "tn"), report.counts.as_row(), strict=True))
    for name in METRICS:
        interval = report.intervals[name]
        out[name] = report.values[name]
        out[f"{name}_ci"] = list(interval) if interval else None
    return out


def benchmark_json(result: BenchmarkResult) -> dict[str, Any]:
    """One JSON object: overall answer-level metrics at the top level (``n``,
    ``precision``, ``recall``, ``f1``, ``balanced_accuracy`` and their ``*_ci``), then
    ``per_task``, ``claims`` and how the run was made."""
    m = result.metrics
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for (split, task, label), n in sorted(result.split_counts.items()):
        counts.setdefault(split, {}).setdefault(task, {})[label] = n
    claims = None
    if m.claims is not None:
        claims = {
            **_report_json(m.claims),
            "answers": m.claims.units,
            "spans": m.spans,
            "uncovered_spans": m.uncovered_spans,
            "per_task": {t: _report_json(r) for t, r in m.claims_per_task.items()},
        }
    return {
        **_report_json(m.answers),
        "per_task": {t: _report_json(r) for t, r in m.per_task.items()},
        "claims": claims,
        "unlabelled": m.unlabelled,
        "no_checked_claims": m.no_checked_claims,
        "unverified": m.unverified,
        "split": result.split,
        "split_description": SPLIT_DESCRIPTION,
        "split_counts": counts,
        "judge": result.judge.name,
        "judge_info": result.judge.model_dump(mode="json"),
        "granularity": result.granularity,
        "batch_size": result.batch_size,
        "data": [str(p) for p in result.files],
        "intervals": {
            "level": 0.95,
            "answer_methods": m.answers.methods,
            "claim_methods": m.claims.methods if m.claims else None,
            "resamples": result.resamples,
            "seed": result.seed,
        },
        "load_s": round(result.load_s, 3),
        "elapsed_s": round(result.elapsed_s, 3),
        "answers_per_s": result.answers_per_s,
    }


def _estimate(report: BinaryReport, name: str) -> str:
    value, interval = report.values[name], report.intervals[name]
    if value is None:
        return "n/a"
    return f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else f"{value:.2f}"


def _metrics_rows(rows: Mapping[str, BinaryReport]) -> list[list[str]]:
    body = [["task", "n", "pos", "TP", "FP", "FN", "TN", "precision", "recall", "F1", "bal. acc."]]
    for name, r in rows.items():
        counts = [str(x) for x in (r.counts.n, r.counts.positives, *r.counts.as_row())]
        body.append([name, *counts, *(_estimate(r, m) for m in METRICS)])
    return body


def _split_rows(counts: Counter[tuple[str, str, str]]) -> list[list[str]]:
    labels = ["hallucinated", "faithful", "unlabelled"]
    body = [["split", "task", *labels]]
    for split, task in sorted({(s, t) for s, t, _ in counts}, key=lambda k: (k[0], _rank(k[1]))):
        body.append([split, task, *(str(counts[(split, task, label)]) for label in labels)])
    return body


def _text_table(body: list[list[str]]) -> str:
    """Plain columns: names left-aligned, numbers right-aligned."""
    widths = [max(len(row[i]) for row in body) for i in range(len(body[0]))]
    left = {i for i, header in enumerate(body[0]) if header in ("split", "task")}

    def line(row: list[str]) -> str:
        cells = enumerate(zip(row, widths, strict=True))
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in cells)

    return "\n".join(line(row) for row in body)


def _md_table(body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(body[0]) + " |", "|" + " --- |" * len(body[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body[1:]])


def render_benchmark(result: BenchmarkResult, markdown: bool = False) -> str:
    """The report as terminal text, or as markdown for a pull request or EVALUATION.md."""
    table = _md_table if markdown else _text_table
    m, info = result.metrics, result.judge
    limits = ", ".join(f"{k} {v:g}" for k, v in sorted(info.thresholds.items()))
    rate = f"{result.answers_per_s:.1f}" if result.answers_per_s else "n/a"
    head = [
        f"Judge: {info.name} v{info.version}, {result.granularity} claims"
        + (f", {limits}" if limits else ""),
        f"Split: {result.split}; data: {', '.join(p.name for p in result.files)}",
        f"Judged {result.judged} answers in {result.elapsed_s:.1f} s ({rate} answers/s, "
        f"batches of {result.batch_size}; judge built in {result.load_s:.1f} s)",
    ]
    blocks = ["\n".join(f"- {line}" for line in head) if markdown else "\n".join(head)]
    blocks += ["Rows per split, task and label (every row of the files read):"]
    blocks += [table(_split_rows(result.split_counts))]
    blocks += ["Answer level: predicted hallucinated (any claim not supported) vs response_label"]
    blocks += [table(_metrics_rows({"all": m.answers, **m.per_task}))]
    if m.no_checked_claims:
        blocks += [f"{m.no_checked_claims} answers had no checked claim (never flagged)."]
    if m.unverified:
        blocks += [
            f"{m.unverified} answers could not be checked (unverified, e.g. a language the "
            "judge was not measured on): left out of both levels, never counted faithful."
        ]
    if m.unlabelled:
        blocks += [f"{m.unlabelled} answers carry no response label (left out)."]
    if m.claims is not None:
        blocks += [
            f"Claim level (RAGTruth spans; {m.claims.counts.n} checked claims in "
            f"{m.claims.units} answers): a claim is hallucinated when it overlaps a labelled "
            "span; positive = judged not supported",
            table(_metrics_rows({"all": m.claims, **m.claims_per_task})),
            f"{m.uncovered_spans} of {m.spans} labelled spans overlap no checked claim "
            "(the judge never had a chance to flag those).",
        ]
    blocks += [
        "95 % intervals in brackets: Wilson for answer-level precision and recall; "
        f"percentile bootstrap ({result.resamples} resamples of answers, seed {result.seed}) "
        "for F1 and balanced accuracy, and for every claim-level number (whole answers "
        "resampled: claims of one answer are not independent)."
    ]
    if result.split != "report":
        blocks += [
            f"Not the report split: quote numbers from `--split report` only. {SPLIT_DESCRIPTION}"
        ]
    return "\n\n".join(blocks) + "\n"


def dump_rows(
    items: Sequence[BenchmarkItem], judgements: Sequence[AnswerJudgement], judge: JudgeInfo
) -> Iterator[dict[str, Any]]:
    """One row per answer with every claim's verdict, score, reasons and (RAGTruth) the
    person's verdict: what threshold calibration needs, without re-running the judge."""
    name = f"{judge.name} v{judge.version}"
    for item, judgement in zip(items, judgements, strict=True):
        person: Sequence[VerdictLabel | None] = (
            person_verdicts(item.case, judgement)[0]
            if item.span_labelled
            else [None] * len(judgement.claims)
        )
        label = item.label
        yield {
            "id": item.row_id,
            "dataset": item.dataset,
            "task_type": item.task_type,
            "split": item.split,
            "label": None if label is None else ("hallucinated" if label else "faithful"),
            # None: not checked, so predicted neither faithful nor hallucinated
            "predicted": judgement.hallucinated if judgement.verified else None,
            "verified": judgement.verified,
            "unverified_reason": judgement.unverified_reason,
            "faithfulness": judgement.faithfulness,
            "checked_claims": judgement.checked_claims,
            "judge": name,
            "claims": [
                {
                    "index": claim.index,
                    "start": claim.start,
                    "end": claim.end,
                    "text": claim.text,
                    "class": claim.claim_class.value,
                    "verdict": claim.verdict.value if claim.verdict else None,
                    "score": claim.score,
                    "reasons": claim.reasons,
                    "person": verdict.value if verdict else None,
                    "risk": claim.risk,
                    "signals": claim.signals,
                }
                for claim, verdict in zip(judgement.claims, person, strict=True)
            ],
        }
