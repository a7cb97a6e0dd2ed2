"""Label Studio's JSON export as label events: one per completed annotation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from streamproc.contracts.label_events import ClaimLabelValue
from streamproc.review.label_files.label_file import LabelFileError, default_label_id
from streamproc.review.label_files.label_studio import labels_from_export, read_label_studio

EXPORT = Path(__file__).parent / "data" / "label_studio_export.json"


def tasks() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(EXPORT.read_text(encoding="utf-8"))
    return loaded


def test_each_completed_annotation_becomes_one_label() -> None:
    ana, unsure, second = read_label_studio(EXPORT)
    assert [x.answer_id for x in (ana, unsure, second)] == ["ans-1", "ans-1", "ans-2"]
    assert ana.reviewer == "ana@example.com" and unsure.reviewer == "label-studio:9"
    assert ana.answer_label == "hallucinated" and unsure.answer_label is None
    assert second.answer_label == "faithful"
    assert [(c.index, c.label) for c in ana.claims] == [
        (0, ClaimLabelValue.SUPPORTED),
        (1, ClaimLabelValue.UNSUPPORTED),
    ]
    assert ana.note == "They repair bicycles; selling is not stated."
    assert ana.labelled_at == datetime(2026, 11, 30, 10, 16, 40, 4521, tzinfo=UTC)
    assert ana.source == "label-studio" and ana.tenant == "acme"
    assert ana.label_id == default_label_id("ans-1", "ana@example.com", ana.labelled_at)
    assert all(x.reviewer != "label-studio:4" for x in (ana, unsure, second)), "cancelled"


def test_reviewer_fills_in_only_a_missing_annotator_and_tenant_must_match() -> None:
    export = tasks()
    del export[0]["annotations"][1]["completed_by"]
    labels = labels_from_export(export, reviewer="imported-by-ops")
    assert [x.reviewer for x in labels] == ["ana@example.com", "imported-by-ops", "ana@example.com"]
    with pytest.raises(LabelFileError, match=r"task 1 \(id 101\): annotation 1"):
        labels_from_export(tasks(), tenant="globex")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t[0]["data"].pop("answer_id"), "data.answer_id is missing"),
        (lambda t: t[1]["annotations"][0]["result"].pop(0), "no 'answer' choice"),
        (
            lambda t: t[1]["annotations"][0]["result"][0]["value"].update(choices=["Maybe"]),
            "expected one of",
        ),
        (
            lambda t: [t[1]["annotations"][0].pop(k) for k in ("updated_at", "created_at")],
            "missing labelled_at",
        ),
    ],
)
def test_problems_name_the_task_and_annotation(change: Any, message: str) -> None:
    export = tasks()
    change(export)
    with pytest.raises(LabelFileError, match=message):
        labels_from_export(export)


def test_a_file_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "export.json"
    bad.write_text('{"id": 1}', encoding="utf-8")
    with pytest.raises(LabelFileError, match="list of tasks"):
        read_label_studio(bad)
    bad.write_text("[\n{", encoding="utf-8")
    with pytest.raises(LabelFileError, match="line 2 is not valid JSON"):
        read_label_studio(bad)
