"""Review items joined with their labels into benchmark rows that the evaluation loaders
read like the third-party benchmarks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamproc.cli.main import main
from streamproc.evaluate.benchmark import load_items
from streamproc.review.label_files.exporter import export_rows, write_rows
from tests.unit.review.label_files.items import ANSWER, EVIDENCE, QUESTION, label, review_item


def test_a_labelled_answer_becomes_a_benchmark_row() -> None:
    item = review_item("a1")
    labels = [
        label("a1", "ana", "hallucinated", {0: "contradicted", 1: "supported"}),
        label("a1", "ben", "hallucinated", {0: "unsupported", 1: "cant_tell"}, minutes=1),
        label("a1", "carla", "faithful", {0: "contradicted"}, minutes=2),
    ]
    [row] = export_rows([item], labels).rows
    assert row["id"] == "a1" and row["dataset"] == "review" and row["task_type"] == "QA"
    assert (row["question"], row["answer"], row["evidence"]) == (QUESTION, ANSWER, [EVIDENCE])
    assert row["response_label"] == "hallucinated", "two of three reviewers"
    assert row["labels"] == [
        {
            "start": 0,
            "end": 33,
            "text": "The order 7 was shipped on 3 May.",
            "verdict": "contradicted",
        }
    ]
    assert ANSWER[0:33] == row["labels"][0]["text"]
    assert row["split"] in ("calibrate", "report")
    meta = row["meta"]
    assert meta["tenant"] == "acme" and meta["assistant_id"] == "bot"
    assert meta["reviewers"] == ["ana", "ben", "carla"]
    assert meta["sampled_because"] == "flagged" and meta["inclusion_probability"] == 1.0
    assert meta["judge_key"] == "rules-1"


def test_ties_and_cant_tell_are_left_out_and_counted() -> None:
    items = [review_item("tie"), review_item("unsure"), review_item("ok")]
    labels = [
        label("tie", "ana", "hallucinated"),
        label("tie", "ben", "faithful"),
        label("unsure", "ana", None),
        label("ok", "ana", "faithful"),
    ]
    result = export_rows(items, labels)
    assert [r["id"] for r in result.rows] == ["ok"]
    assert result.undecided == 2 and result.skipped_ids == ["tie", "unsure"]
    assert result.rows[0]["labels"] == []


def test_one_vote_per_reviewer_labels_once_each_and_only_joined_labels() -> None:
    items = [review_item("a1"), review_item("a2", tenant="globex")]
    labels = [
        label("a1", "ana", "faithful", minutes=0),
        label("a1", "ana", "hallucinated", minutes=5),  # ana changed her mind: latest counts
        label("a1", "ana", "hallucinated", minutes=5),  # the same label twice (re-import)
        label("a1", "ben", "faithful", minutes=1),
        label("a1", "carla", "hallucinated", minutes=2),
        label("nowhere", "ana", "faithful"),
        label("a2", "ana", "faithful", tenant="acme"),
    ]
    result = export_rows(items, labels)
    [row] = result.rows
    assert row["response_label"] == "hallucinated" and row["meta"]["reviewers"] == [
        "ana",
        "ben",
        "carla",
    ]
    assert result.without_item == 1 and result.other_tenant == 1


def test_the_split_is_seeded_and_about_half_each() -> None:
    items = [review_item(f"a{i}") for i in range(40)]
    labels = [label(f"a{i}", "ana", "faithful") for i in range(40)]
    splits = [r["split"] for r in export_rows(items, labels, seed=1).rows]
    assert splits == [r["split"] for r in export_rows(items, labels, seed=1).rows]
    assert splits != [r["split"] for r in export_rows(items, labels, seed=2).rows]
    assert 10 <= splits.count("calibrate") <= 30


def test_exported_rows_load_as_benchmark_items(tmp_path: Path) -> None:
    items = [review_item("a1"), review_item("a2", answer="Delivery takes two days.")]
    labels = [
        label("a1", "ana", "hallucinated", {0: "contradicted"}),
        label("a2", "ana", "faithful", {0: "supported"}),
    ]
    out = tmp_path / "review.jsonl"
    assert write_rows(export_rows(items, labels).rows, out) == 2
    assert all(json.loads(line)["dataset"] == "review" for line in out.read_text().splitlines())
    first, second = load_items([out], "all")
    assert (first.row_id, first.label, first.task_type) == ("a1", True, "QA")
    assert (second.row_id, second.label) == ("a2", False)
    event = first.case.event
    assert event.question == QUESTION and [e.text for e in event.evidence] == [EVIDENCE]
    assert event.labels is not None and event.labels.spans is not None
    [span] = event.labels.spans
    assert (span.start, span.end, span.verdict) == (0, 33, "contradicted")


def test_eval_benchmark_runs_on_exported_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [review_item("a1"), review_item("a2", answer="Delivery takes two days.")]
    labels = [label("a1", "ana", "hallucinated"), label("a2", "ana", "faithful")]
    out = tmp_path / "review.jsonl"
    write_rows(export_rows(items, labels).rows, out)
    argv = ["eval", "benchmark", "--judge", "rules", "--data", str(out), "--split", "all"]
    assert main([*argv, "--json", "--resamples", "10"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 2 and report["unlabelled"] == 0
    assert list(report["per_task"]) == ["QA"] and report["per_task"]["QA"]["n"] == 2
