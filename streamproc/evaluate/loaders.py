"""Read labelled answers in the three shapes we meet, and turn each into an AnswerEvent.

* the course lab: ``seed_cases.jsonl`` + ``seed_notes.json`` (note ids in retrieved order,
  one person label per sentence claim);
* the benchmark shape of ``data/`` (RAGTruth, HaluEval: evidence passages, hallucinated
  character spans, a response label);
* the project's own AnswerEvent JSONL with ``labels`` (what ``streamproc/samples`` holds).

The converters are shared with ``modelwork/make_samples.py``, so the in-repo samples and
the original files judge identically.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from streamproc.contracts.events import (
    AnswerEvent,
    EvaluationLabels,
    EvidenceItem,
    EvidenceKind,
    LabelledSpan,
    VerdictLabel,
)
from streamproc.evaluate.cases import LabelledCase

__all__ = [
    "LoadError",
    "benchmark_row_to_event",
    "default_cases",
    "json_rows",
    "lab_case_to_event",
    "load_cases",
]

# Fixed event times, so converted files are byte-for-byte reproducible.
_SEED_START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
_BENCHMARK_START = datetime(2025, 1, 6, 10, 0, tzinfo=UTC)
_STEP = timedelta(seconds=5)

_SOURCES = {
    "RAGTruth": "RAGTruth (Niu et al., ACL 2024), MIT: word-level human labels",
    "HaluEval": "HaluEval QA (Li et al., EMNLP 2023), MIT: answers hallucinated on purpose",
}


class LoadError(ValueError):
    """A cases file we cannot use; the message names the file and line."""


def default_cases() -> Traversable:
    """The in-repo seed-lab sample: works on a fresh clone without ``../shared``."""
    return files("streamproc").joinpath("samples/seed_lab.answers.jsonl")


# ---------------------------------------------------------------------------- converters


def lab_case_to_event(
    case: Mapping[str, Any], notes: Mapping[str, str], position: int
) -> AnswerEvent:
    """One course-lab case as an AnswerEvent: the retrieved notes, in retrieved order."""
    case_id = str(case["id"])
    unknown = [i for i in case["retrieved"] if i not in notes]
    if unknown:
        raise LoadError(f"{case_id}: unknown note ids {unknown}")
    return AnswerEvent(
        event_id=f"seed-{case_id}",
        answer_id=f"seed-{case_id}",
        conversation_id=f"seed-conversation-{case_id}",
        tenant="demo",
        assistant_id="sap-helpdesk",
        model="course-lab-answers",
        occurred_at=_SEED_START + position * _STEP,
        question=case["question"],
        answer=case["answer"],
        evidence=[
            EvidenceItem(id=note_id, text=notes[note_id], source="course help notes")
            for note_id in case["retrieved"]
        ],
        answerable=case["answerable"],
        labels=EvaluationLabels(
            claims=[VerdictLabel(label) for label in case["labels"]],
            source="groundedness course unit, lab labels (one per sentence claim)",
        ),
    )


def benchmark_row_to_event(row: Mapping[str, Any], position: int) -> AnswerEvent:
    """One ``data/`` benchmark row (RAGTruth, HaluEval) as an AnswerEvent with span labels.

    Data-to-text evidence is a JSON record serialised as text, hence kind ``record``.
    """
    task = str(row.get("task_type") or "QA")
    kind = EvidenceKind.RECORD if task == "Data2txt" else EvidenceKind.PASSAGE
    source = (row.get("meta") or {}).get("source")
    dataset = str(row.get("dataset") or "benchmark")
    return AnswerEvent(
        event_id=str(row["id"]),
        answer_id=str(row["id"]),
        conversation_id=str(row["id"]),
        tenant="demo",
        assistant_id=f"{dataset.lower()}-{task.lower()}",
        model=str(row["model"]),
        occurred_at=_BENCHMARK_START + position * _STEP,
        question=row.get("question"),
        answer=row["answer"],
        evidence=[
            EvidenceItem(id=f"P{i}", text=text, kind=kind, source=source)
            for i, text in enumerate(row["evidence"], start=1)
        ],
        labels=EvaluationLabels(
            spans=[
                LabelledSpan(
                    start=span["start"],
                    end=span["end"],
                    text=span.get("text"),
                    verdict=span.get("verdict", "hallucinated"),
                    label_type=span.get("label_type"),
                )
                for span in row.get("labels") or []
            ],
            response=row.get("response_label"),
            source=_SOURCES.get(dataset, dataset),
        ),
    )


# -------------------------------------------------------------------------------- loading


def json_rows(source: Path | Traversable) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSONL file; clear errors."""
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise LoadError(f"cannot read {source}: {error}") from error
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise LoadError(f"{source.name}: line {number} is not valid JSON ({error})") from None
        if not isinstance(row, dict):
            raise LoadError(f"{source.name}: line {number} is not a JSON object")
        yield number, row


def _load_notes(path: Path) -> dict[str, str]:
    try:
        notes = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise LoadError(f"cannot read the notes file {path}: {error}") from error
    if not isinstance(notes, dict):
        raise LoadError(f"{path}: expected one JSON object of note id -> text")
    return {str(k): str(v) for k, v in notes.items()}


def load_cases(source: Path | Traversable, notes: Path | None = None) -> list[LabelledCase]:
    """Every case in ``source``, whatever its shape (decided per line).

    Lab-format lines need the notes: ``notes``, else ``seed_notes.json`` beside ``source``.
    """
    cases: list[LabelledCase] = []
    lab_notes: dict[str, str] | None = None
    for number, row in json_rows(source):
        origin = f"{source.name}:{number}"
        try:
            if "retrieved" in row:
                if lab_notes is None:
                    lab_notes = _load_notes(notes or _sibling_notes(source))
                event = lab_case_to_event(row, lab_notes, len(cases))
            elif "dataset" in row and "event_id" not in row:
                event = benchmark_row_to_event(row, len(cases))
            else:
                event = AnswerEvent.model_validate(row)
        except LoadError as error:
            raise LoadError(f"{origin}: {error}") from None
        except (ValidationError, KeyError, TypeError, ValueError) as error:
            raise LoadError(f"{origin}: not a usable case ({error})") from None
        cases.append(LabelledCase(event=event, origin=origin))
    if not cases:
        raise LoadError(f"{source.name}: no cases")
    return cases


def _sibling_notes(source: Path | Traversable) -> Path:
    if isinstance(source, Path):
        return source.with_name("seed_notes.json")
    raise LoadError("lab-format cases need --notes")
