"""The answer-length baseline: k chosen on calibrate only, strata and pairs as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.length_baseline import (
    Row,
    balanced_accuracy,
    equal_length_pairs,
    length_rule,
    main,
    stratified,
    stratum,
    where_length_errs,
)
from streamproc.evaluate.splits import split_of


def _row(row_id: str, words: int, hallucinated: bool, split: str) -> Row:
    return Row(row_id, "QA", split, words, hallucinated)


def test_balanced_accuracy_needs_both_labels() -> None:
    assert balanced_accuracy([(True, True), (False, False)]) == 1.0
    assert balanced_accuracy([(True, True), (True, False), (False, True)]) == 0.25
    assert balanced_accuracy([(True, True)]) is None


def test_k_is_chosen_on_calibrate_and_quoted_on_report() -> None:
    # Calibrate: more than 2 words separates perfectly; report: more than 5 would.
    rows = [
        _row("c1", 1, False, "calibrate"),
        _row("c2", 2, False, "calibrate"),
        _row("c3", 3, True, "calibrate"),
        _row("c4", 6, True, "calibrate"),
        _row("r1", 4, False, "report"),
        _row("r2", 5, False, "report"),
        _row("r3", 6, True, "report"),
        _row("r4", 7, True, "report"),
    ]
    rule = length_rule(rows, "report")
    assert rule["chosen_k"] == 2
    assert rule["balanced_accuracy"] == 0.5
    by_k = {entry["k"]: entry for entry in rule["thresholds"]}
    assert by_k[5]["quoted"] == 1.0
    assert by_k[2]["calibrate"] == 1.0


def test_strata_are_exact_for_short_answers_and_about_ten_percent_wide_after() -> None:
    assert len({stratum(words) for words in range(1, 13)}) == 12
    assert stratum(100) == stratum(105)
    assert stratum(100) != stratum(115)


def test_stratified_weights_by_the_pairs_a_stratum_can_form() -> None:
    rows = [
        _row("a", 1, False, "report"),
        _row("b", 1, False, "report"),
        _row("c", 1, True, "report"),  # one pair at 1 word: judge right on all
        _row("d", 8, True, "report"),
        _row("e", 8, True, "report"),
        _row("f", 8, False, "report"),
        _row("g", 8, False, "report"),  # two pairs at 8 words: judge flags everything
        _row("h", 20, True, "report"),  # one label only: left out
    ]
    predicted = {"a": False, "b": False, "c": True, "d": True, "e": True, "f": True, "g": True}
    predicted["h"] = True
    result = stratified(rows, predicted)
    assert result.strata == 2
    assert result.answers == 7
    assert result.weight == 3
    assert result.balanced_accuracy == pytest.approx((1.0 * 1 + 0.5 * 2) / 3)


def test_the_judge_where_the_length_rule_errs() -> None:
    rows = [
        _row("short-bad", 2, True, "report"),  # the rule (k = 4) clears it
        _row("long-good", 9, False, "report"),  # the rule flags it
        _row("long-bad", 9, True, "report"),  # the rule is right: left out
    ]
    predicted = {"short-bad": True, "long-good": True, "long-bad": True}
    errs = where_length_errs(rows, predicted, 4)
    assert (errs["hallucinated"], errs["caught"], errs["faithful"], errs["flagged"]) == (1, 1, 1, 1)
    assert errs["balanced_accuracy"] == 0.5


def test_equal_length_pairs_are_the_datas_own_pairs() -> None:
    rows = [
        _row("halueval-qa-1-right", 3, False, "report"),
        _row("halueval-qa-1-hallucinated", 3, True, "report"),
        _row("halueval-qa-2-right", 1, False, "report"),
        _row("halueval-qa-2-hallucinated", 9, True, "report"),
        _row("ragtruth-5", 3, True, "report"),
    ]
    pairs = equal_length_pairs(rows)
    assert [(a.row_id, b.row_id) for a, b in pairs] == [
        ("halueval-qa-1-right", "halueval-qa-1-hallucinated")
    ]


def test_cli_reads_benchmark_rows_and_a_dump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, dump = tmp_path / "qa.jsonl", tmp_path / "dump.jsonl"
    rows, dumped = [], []
    for n in range(40):
        for kind, answer in (("right", "Paris"), ("hallucinated", "It is in Lyon, France")):
            row_id = f"halueval-qa-{n}-{kind}"
            label = "faithful" if kind == "right" else "hallucinated"
            rows.append(
                {"id": row_id, "task_type": "QA", "answer": answer, "response_label": label}
            )
            dumped.append({"id": row_id, "predicted": kind == "hallucinated"})
    data.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    dump.write_text("\n".join(json.dumps(row) for row in dumped), encoding="utf-8")
    assert {split_of(row["id"]) for row in rows} == {"calibrate", "report"}
    assert main(["--data", str(data), "--split", "report", "--dump", str(dump), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    qa = result["tasks"]["QA"]
    assert qa["length_rule"]["chosen_k"] == 1
    assert qa["length_rule"]["balanced_accuracy"] == 1.0
    assert qa["judge"]["balanced_accuracy"] == 1.0
    # Every right answer is one word and every hallucinated one five: no stratum holds both.
    assert qa["judge"]["stratified"]["balanced_accuracy"] is None
    assert qa["judge"]["equal_length_pairs"]["pairs"] == 0
    assert qa["judge"]["where_length_errs"]["balanced_accuracy"] is None  # the rule errs nowhere
