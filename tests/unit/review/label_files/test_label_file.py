"""The label JSONL: fields filled in, deterministic ids, and bad lines named by number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamproc.contracts.label_events import ClaimLabelValue
from streamproc.review.label_files.label_file import (
    LabelFileError,
    default_label_id,
    read_label_file,
)


def write(tmp_path: Path, *rows: Any) -> Path:
    path = tmp_path / "labels.jsonl"
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


LABEL = {
    "answer_id": "ans-1",
    "tenant": "acme",
    "reviewer": "ana",
    "labelled_at": "2026-11-30T10:16:40Z",
    "answer_label": "hallucinated",
    "claims": [{"index": 1, "label": "unsupported"}, {"index": 0, "label": "supported"}],
    "note": "selling is not stated",
}


def test_a_label_without_an_id_gets_the_same_uuid5_on_every_import(tmp_path: Path) -> None:
    path = write(tmp_path, LABEL, {**LABEL, "reviewer": "ben", "answer_label": None})
    first, second = read_label_file(path)
    again = read_label_file(path)
    assert first.label_id == again[0].label_id and second.label_id == again[1].label_id
    assert first.label_id != second.label_id, "another reviewer: another label"
    assert first.label_id == default_label_id("ans-1", "ana", first.labelled_at)
    assert first.source == "import" and second.answer_label is None
    assert [c.label for c in first.claims] == [
        ClaimLabelValue.UNSUPPORTED,
        ClaimLabelValue.SUPPORTED,
    ]


def test_a_given_label_id_is_kept(tmp_path: Path) -> None:
    [label] = read_label_file(write(tmp_path, {**LABEL, "label_id": "L-7", "source": "sheet"}))
    assert label.label_id == "L-7" and label.source == "sheet"


def test_reviewer_and_tenant_options_fill_in_missing_fields(tmp_path: Path) -> None:
    row = {k: v for k, v in LABEL.items() if k not in ("reviewer", "tenant")}
    [label] = read_label_file(write(tmp_path, row), reviewer="carla", tenant="acme")
    assert (label.reviewer, label.tenant) == ("carla", "acme")
    [own] = read_label_file(write(tmp_path, LABEL), reviewer="carla")
    assert own.reviewer == "ana", "the line's own reviewer wins"


def test_a_line_of_another_tenant_than_the_imported_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LabelFileError, match=r"line 1: tenant 'acme' is not the imported"):
        read_label_file(write(tmp_path, LABEL), tenant="globex")


def test_every_bad_line_is_named_by_its_number_and_nothing_is_read(tmp_path: Path) -> None:
    naive = {**LABEL, "labelled_at": "2026-11-30T10:16:40"}
    path = write(
        tmp_path,
        LABEL,
        "{not json",
        "",
        {**LABEL, "answer_label": "maybe"},
        naive,
        {k: v for k, v in LABEL.items() if k != "labelled_at"},
        "[1, 2]",
    )
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    message = str(caught.value)
    assert "line 1:" not in message
    for number in (2, 4, 5, 6, 7):
        assert f"line {number}:" in message
    assert "answer_label" in message and "missing labelled_at" in message
    assert "timezone" in message.lower()


def test_an_empty_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LabelFileError, match="no labels"):
        read_label_file(write(tmp_path, ""))
