"""What ``replay_reviews.py`` replays and how people are stood in for: benchmark rows
turned into fresh label-free answers, the seeded FaithBench-like resample, the seeded
choice of review items and their gold labels.

Pure (no broker), so the tests check it directly; it changes when the replayed traffic
or the stand-in reviewers change, not when the stream or the numbers do.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from streamproc.contracts.events import AnswerEvent
from streamproc.contracts.label_events import JudgeAccuracyEvent, LabelEvent, ReviewItem
from streamproc.evaluate.loaders import benchmark_row_to_event, json_rows

__all__ = [
    "ASSISTANT",
    "REVIEWER",
    "TENANT",
    "Row",
    "choose_items",
    "gold_label",
    "labels_counted",
    "load_rows",
    "replay_rows",
    "resample",
]

TENANT = "replay"
ASSISTANT = "replay"
REVIEWER = "replay"


# ---------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One benchmark row as replayed: its event (no labels) and its gold label."""

    event: AnswerEvent
    hallucinated: bool
    task_type: str
    """The row's own task type (the worker decides its own for the outcome)."""


def load_rows(paths: Sequence[Path], task_type: str | None) -> list[dict[str, Any]]:
    """The benchmark rows of ``paths`` (of ``task_type`` only, when given) that carry a
    gold ``response_label``."""
    rows = []
    for path in paths:
        for _, row in json_rows(path):
            if task_type is not None and row.get("task_type") != task_type:
                continue
            if row.get("response_label") in ("hallucinated", "faithful"):
                rows.append(row)
    return rows


def resample(
    rows: Sequence[dict[str, Any]], keep_hallucinated: float, seed: int
) -> list[dict[str, Any]]:
    """Every faithful row and a seeded share of the hallucinated ones, in file order: a
    lower hallucination prevalence from the same rows (the FaithBench-like traffic)."""
    hallucinated = sorted(r["id"] for r in rows if r["response_label"] == "hallucinated")
    kept = set(
        random.Random(seed).sample(hallucinated, round(keep_hallucinated * len(hallucinated)))
    )
    return [r for r in rows if r["response_label"] == "faithful" or r["id"] in kept]


def replay_rows(rows: Sequence[dict[str, Any]], run: str) -> list[Row]:
    """The rows as new live answers: fresh ids, one tenant and assistant, labels dropped
    (the worker must not see them), ``occurred_at`` set when produced."""
    replayed = []
    for index, row in enumerate(rows):
        event = benchmark_row_to_event(row, index).model_copy(
            update={
                "event_id": f"{run}-e{index}",
                "answer_id": f"{run}-a{index}",
                "conversation_id": f"{run}-c{index}",
                "tenant": TENANT,
                "assistant_id": ASSISTANT,
                "labels": None,
            }
        )
        replayed.append(
            Row(event, row["response_label"] == "hallucinated", str(row.get("task_type")))
        )
    return replayed


# -------------------------------------------------------------------------- labels


def choose_items(items: Iterable[ReviewItem], share: float, seed: int) -> list[ReviewItem]:
    """A seeded share of the review items (the same items for the same seed, whatever
    order they were read in)."""
    ordered = sorted(items, key=lambda item: item.answer_id)
    count = round(share * len(ordered))
    chosen = random.Random(seed).sample(ordered, count)
    return sorted(chosen, key=lambda item: item.answer_id)


def gold_label(item: ReviewItem, gold: Mapping[str, bool], labelled_at: datetime) -> LabelEvent:
    """The label a person would give, stood in for by the row's gold response label."""
    return LabelEvent(
        label_id=f"replay-{item.answer_id}",
        answer_id=item.answer_id,
        tenant=item.tenant,
        reviewer=REVIEWER,
        labelled_at=labelled_at,
        answer_label="hallucinated" if gold[item.answer_id] else "faithful",
        source="replay",
    )


def labels_counted(events: Mapping[str, JudgeAccuracyEvent], tenant: str) -> int:
    """Labels the latest accuracy events of ``tenant``'s cells count."""
    return sum(e.labels for e in events.values() if e.cell.tenant == tenant)
