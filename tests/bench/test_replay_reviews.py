"""The replay's pure parts: rows to fresh label-free answers, the seeded FaithBench-like
resample, the seeded choice of review items and their gold labels, when the accuracy
events count every label, and the numbers computed with the window loop's functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scripts._replay_reviews_numbers import summarise
from scripts._replay_reviews_rows import (
    ASSISTANT,
    TENANT,
    Row,
    choose_items,
    gold_label,
    labels_counted,
    load_rows,
    replay_rows,
    resample,
)
from streamproc.config import Settings
from streamproc.contracts.events import (
    AnswerJudgement,
    AnswerOutcome,
    JudgeInfo,
    Timings,
    Verdict,
)
from streamproc.contracts.label_events import AccuracyCell, JudgeAccuracyEvent, ReviewItem, Tally
from streamproc.monitor.windows.live_accuracy import LiveAccuracy
from streamproc.monitor.windows.panes import WindowTotals
from streamproc.rates.judge_accuracy import JudgeAccuracy
from streamproc.rates.live_accuracy import CellState, accuracy_event

NOW = datetime(2026, 5, 1, tzinfo=UTC)
JUDGE = "rules"
RULES = JudgeInfo(name="rules", version="1", granularity="sentence")


def _row(number: int, label: str, task: str = "Summary") -> dict[str, Any]:
    return {
        "id": f"row-{number}",
        "dataset": "RAGTruth",
        "task_type": task,
        "model": "gpt",
        "question": None,
        "evidence": ["The sky is blue."],
        "answer": "The sky is green." if label == "hallucinated" else "The sky is blue.",
        "labels": [{"start": 11, "end": 16, "text": "green", "verdict": "contradicted"}]
        if label == "hallucinated"
        else [],
        "response_label": label,
        "split": "dev",
        "meta": {},
    }


def _file(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_rows_become_fresh_answers_without_their_labels(tmp_path: Path) -> None:
    rows = [_row(0, "hallucinated"), _row(1, "faithful"), _row(2, "faithful", "Data2txt")]
    rows.append({**_row(3, "faithful"), "response_label": None})  # no gold: not replayed
    loaded = load_rows([_file(tmp_path, rows)], "Summary")
    assert [r["id"] for r in loaded] == ["row-0", "row-1"]
    replayed = replay_rows(loaded, "run")
    assert [(r.event.answer_id, r.hallucinated, r.task_type) for r in replayed] == [
        ("run-a0", True, "Summary"),
        ("run-a1", False, "Summary"),
    ]
    first = replayed[0].event
    assert first.labels is None and (first.tenant, first.assistant_id) == (TENANT, ASSISTANT)
    assert first.answer == "The sky is green." and first.evidence[0].text == "The sky is blue."
    assert len({r.event.event_id for r in replayed}) == 2


def test_the_resample_keeps_every_faithful_row_and_a_seeded_share_of_the_others() -> None:
    rows = [_row(i, "hallucinated" if i % 3 == 0 else "faithful") for i in range(30)]
    kept = resample(rows, 1 / 3, seed=4)
    assert kept == resample(list(reversed(rows)), 1 / 3, seed=4)[::-1]  # order-free choice
    faithful = [r for r in rows if r["response_label"] == "faithful"]
    assert [r for r in kept if r["response_label"] == "faithful"] == faithful
    assert sum(r["response_label"] == "hallucinated" for r in kept) == round(10 / 3)
    assert {r["id"] for r in resample(rows, 0.0, seed=4)} == {r["id"] for r in faithful}


def _item(answer_id: str) -> ReviewItem:
    return ReviewItem.model_validate(
        {
            "answer_id": answer_id,
            "event_id": f"e-{answer_id}",
            "conversation_id": "c",
            "tenant": TENANT,
            "assistant_id": ASSISTANT,
            "model": "m",
            "task_type": "Summary",
            "occurred_at": NOW,
            "judged_at": NOW,
            "sampled_because": "flagged",
            "inclusion_probability": 1.0,
            "answer": "a",
            "judgement": _judgement(True).model_dump(mode="json"),
            "judge": RULES.model_dump(mode="json"),
        }
    )


def _judgement(hallucinated: bool, abstained: bool = False) -> AnswerJudgement:
    return AnswerJudgement.model_validate(
        {
            "hallucinated": hallucinated,
            "abstained": abstained,
            "action": "withhold" if hallucinated else "pass",
            "faithfulness": 0.5,
            "checked_claims": 1,
            "supported_claims": int(not hallucinated),
            "contradicted_claims": int(hallucinated),
            "unsupported_claims": 0,
            "outcome": "abstained" if abstained else "wrong" if hallucinated else "correct",
            "claims": [],
        }
    )


def test_a_seeded_share_of_the_items_gets_the_gold_label() -> None:
    items = [_item(f"a{i}") for i in range(20)]
    chosen = choose_items(items, 0.25, seed=7)
    assert len(chosen) == 5
    assert chosen == choose_items(list(reversed(items)), 0.25, seed=7)
    assert len(choose_items(items, 1.0, seed=7)) == 20
    gold = {item.answer_id: index % 2 == 0 for index, item in enumerate(items)}
    label = gold_label(items[0], gold, NOW)
    assert (label.answer_id, label.tenant, label.answer_label) == ("a0", TENANT, "hallucinated")
    assert (label.reviewer, label.source) == ("replay", "replay")
    assert gold_label(items[1], gold, NOW).answer_label == "faithful"


def _event(tenant: str, labels: int, task: str = "Summary") -> JudgeAccuracyEvent:
    cell = AccuracyCell(tenant=tenant, assistant_id=ASSISTANT, task_type=task, judge_key=JUDGE)
    tp, fn, tn, fp = 18, 2, 45, 5

    def tally(n: int) -> Tally:
        return Tally(n=n, w=n, w2=n)

    state = CellState(
        tp=tally(tp),
        fn=tally(fn),
        tn=tally(tn),
        fp=tally(fp),
        labelled_answers=labels,
        labels=labels,
    )
    return accuracy_event(cell, state, offline=None, findings=[], now=NOW)


def test_labels_are_counted_over_the_tenants_latest_cell_events() -> None:
    events = {e.cell.key: e for e in (_event(TENANT, 40), _event(TENANT, 30, "QA"))}
    events["other"] = _event("someone-else", 99)
    assert labels_counted(events, TENANT) == 70


def _verdict(answer_id: str, hallucinated: bool, abstained: bool = False) -> Verdict:
    return Verdict(
        event_id=f"e-{answer_id}",
        answer_id=answer_id,
        conversation_id="c",
        tenant=TENANT,
        assistant_id=ASSISTANT,
        model="m",
        occurred_at=NOW,
        judged_at=NOW,
        judgement=_judgement(hallucinated, abstained),
        judge=RULES,
        timings=Timings(judge_ms=1.0, batch_size=1),
    )


def _outcome(answer_id: str, hallucinated: bool, task: str = "Summary") -> AnswerOutcome:
    return AnswerOutcome(
        event_id=f"e-{answer_id}",
        answer_id=answer_id,
        tenant=TENANT,
        assistant_id=ASSISTANT,
        model="m",
        occurred_at=NOW,
        hallucinated=hallucinated,
        abstained=False,
        contradicted_claims=0,
        unsupported_claims=0,
        faithfulness=None,
        judge_ms=1.0,
        task_type=task,
    )


def test_the_numbers_are_the_window_loops_on_the_whole_replay(tmp_path: Path) -> None:
    rows = [_row(i, "hallucinated" if i < 30 else "faithful") for i in range(100)]
    replayed: list[Row] = replay_rows(rows, "r")
    flagged = {r.event.answer_id for r in replayed[:27]} | {
        r.event.answer_id for r in replayed[30:37]
    }
    verdicts = {
        r.event.answer_id: _verdict(r.event.answer_id, r.event.answer_id in flagged)
        for r in replayed[:-1]
    }
    last = replayed[-1].event.answer_id
    verdicts[last] = _verdict(last, False, abstained=True)  # not in any rate
    outcomes = {a: _outcome(a, v.judgement.hallucinated) for a, v in verdicts.items()}
    offline = JudgeAccuracy.model_validate(
        {
            "measured_at": "x",
            "table": "y",
            "tasks": {"Summary": {"tp": 16, "fn": 1, "tn": 17, "fp": 25}},
        }
    )
    settings = Settings()
    table = LiveAccuracy(settings.bootstrap_servers, settings.labels.accuracy_topic)
    event = _event(TENANT, 70)
    table.apply(event.cell.key.encode(), event.model_dump_json().encode())
    live = table.for_judge(JUDGE, min_labels=30)
    result = summarise(replayed, outcomes, verdicts, offline=offline, live=live)
    assert (result["answers"], result["answered"], result["abstained"]) == (100, 99, 1)
    assert result["true_rate"] == pytest.approx(30 / 99)
    assert result["raw_rate"] == pytest.approx(34 / 99)
    window = WindowTotals(answered=99, hallucinated=34, by_task={"Summary": [99, 34]})
    expected_live = window.corrected(offline, lambda t: live.live_counts(TENANT, ASSISTANT, t))
    assert expected_live is not None and expected_live.source == "live"
    assert result["corrected_live"] == expected_live.estimate
    assert result["corrected_live_interval"] == [expected_live.low, expected_live.high]
    assert result["labels_used"] == 70
    expected_offline = window.corrected(offline)
    assert expected_offline is not None
    assert result["corrected_offline"] == expected_offline.estimate
    summary = result["by_task_type"]["Summary"]
    assert (summary["answers"], summary["flagged"], summary["gold_hallucinated"]) == (99, 34, 30)
    assert summary["live_counts"] == {"tp": 18.0, "fn": 2.0, "tn": 45.0, "fp": 5.0}
    # Too few labels for min_labels: the live figure is the offline one, and says so.
    few = summarise(
        replayed, outcomes, verdicts, offline=offline, live=table.for_judge(JUDGE, min_labels=71)
    )
    assert few["corrected_live"] == few["corrected_offline"]
    assert (few["corrected_live_source"], few["labels_used"]) == ("offline-benchmark", 0)


def test_the_script_keeps_its_command_line() -> None:
    """The script imports its split-out parts and parses the documented options."""
    from scripts.replay_reviews import parse_args

    args = parse_args(["--data", "a.jsonl", "b.jsonl", "--label-share", "0.5", "--seed", "3"])
    assert (args.data, args.label_share, args.seed) == ([Path("a.jsonl"), Path("b.jsonl")], 0.5, 3)
    assert (args.sample_rate, args.task_type, args.keep_hallucinated) == (0.2, None, None)
