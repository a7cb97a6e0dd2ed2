"""The shipped confusion counts are the documented report-split tables (EVALUATION.md,
models/README.md), and load by judge key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamproc.inference.options import JudgeSettings
from streamproc.judge.decision.calibrator import ALL_REGIMES
from streamproc.rates.corrected_rate import ConfusionCounts, corrected_rate
from streamproc.rates.judge_accuracy import (
    TASK_OF_REGIME,
    judge_accuracy,
    judge_key,
    known_judges,
)
from streamproc.wiring import judge_key_of

EVALUATION = Path(__file__).resolve().parents[3] / "EVALUATION.md"
MODELS = Path(__file__).resolve().parents[3] / "models" / "README.md"
TASKS = ("QA", "Summary", "Data2txt")
WITH_AGENT = (*TASKS, "Agent")  # measured on the agent set too


def _table_after(document: Path, marker: str) -> dict[str, ConfusionCounts]:
    """The answer-level table (task | n | pos | TP | FP | FN | TN | ...) after ``marker``."""
    text = document.read_text(encoding="utf-8")
    start = text.index(marker)
    rows: dict[str, ConfusionCounts] = {}
    for line in text[start:].splitlines():
        match = re.match(r"\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", line)
        if match:
            task, n, pos, tp, fp, fn, tn = match.groups()
            counts = ConfusionCounts(tp=int(tp), fn=int(fn), tn=int(tn), fp=int(fp))
            assert counts.tp + counts.fn == int(pos)
            assert counts.tp + counts.fn + counts.tn + counts.fp == int(n)
            rows[task] = counts
        elif rows and not line.startswith("|"):
            return rows
    return rows


@pytest.mark.parametrize(
    ("key", "document", "marker", "tasks"),
    [
        (
            "nli+verdict-calibrator-verifier-v11+answer-calibrator-v11",
            EVALUATION,
            "The full answer-level table of the default judge",
            WITH_AGENT,
        ),
        (
            "nli+verdict-calibrator-verifier-v5+answer-calibrator-v5",
            MODELS,
            "The previous default, verifier v2 with calibrator v5",
            WITH_AGENT,
        ),
        (
            "nli+verdict-calibrator-verifier-v3+answer-calibrator-v2",
            MODELS,
            "The default before that, verifier v1 with calibrator v3",
            WITH_AGENT,
        ),
        (
            "nli+verdict-calibrator-verifier-v2+answer-calibrator-v1",
            MODELS,
            "The default before that, calibrator v2 with answer calibrator v1",
            TASKS,
        ),
        ("nli+verdict-calibrator-verifier-v1", MODELS, "The same judge with calibrator v1", TASKS),
        ("nli+verdict-calibrator-l3-embedder-v1", MODELS, "The 3-layer embedder's judge", TASKS),
        (
            "rules",
            EVALUATION,
            "**Rules judge** (the course's word-overlap baseline), same rows",
            WITH_AGENT,
        ),
    ],
)
def test_shipped_counts_are_the_documented_report_split_tables(
    key: str, document: Path, marker: str, tasks: tuple[str, ...]
) -> None:
    table = _table_after(document, marker)
    accuracy = judge_accuracy(key)
    assert accuracy is not None
    for task in tasks:
        assert accuracy.for_task(task) == table[task], task
    assert set(accuracy.tasks) == set(tasks)


def test_the_default_judge_settings_find_their_counts() -> None:
    key = judge_key_of(JudgeSettings())
    assert key == "nli+verdict-calibrator-verifier-v11+answer-calibrator-v11"
    accuracy = judge_accuracy(key)
    assert accuracy is not None
    qa = accuracy.for_task("QA")
    assert qa is not None
    assert qa.sensitivity == pytest.approx(494 / 590)
    assert qa.specificity == pytest.approx(577 / 590)
    assert corrected_rate(60, 1000, qa).identifiable
    summary = accuracy.for_task("Summary")
    assert summary is not None and not corrected_rate(60, 1000, summary).identifiable
    agent = accuracy.for_task("Agent")
    assert agent is not None and agent.sensitivity == pytest.approx(305 / 488)
    assert accuracy.for_task("dialogue") is None


def test_unmeasured_judges_have_no_counts() -> None:
    assert judge_key("nli", None) == "nli"
    assert judge_key("rules", "ignored") == "rules"
    assert judge_key("nli", "c", "a") == "nli+c+a" and judge_key("nli", "c", None) == "nli+c"
    other = JudgeSettings(calibrator="verdict-calibrator-verifier-v1")
    assert judge_key_of(other) == "nli+verdict-calibrator-verifier-v1", "no answer calibrator"
    assert judge_accuracy("nli") is None
    assert judge_accuracy(judge_key("nli", "verdict-calibrator-aegis-v1")) is None
    assert known_judges() == (
        "nli+verdict-calibrator-l3-embedder-v1",
        "nli+verdict-calibrator-verifier-v1",
        "nli+verdict-calibrator-verifier-v11+answer-calibrator-v11",
        "nli+verdict-calibrator-verifier-v2+answer-calibrator-v1",
        "nli+verdict-calibrator-verifier-v3+answer-calibrator-v2",
        "nli+verdict-calibrator-verifier-v5+answer-calibrator-v5",
        "rules",
    )


def test_every_calibrator_regime_maps_to_a_measured_task_type() -> None:
    assert set(TASK_OF_REGIME) == set(ALL_REGIMES)
    assert set(TASK_OF_REGIME.values()) == set(WITH_AGENT)
