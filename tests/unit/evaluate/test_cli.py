"""The course's published numbers, through the real ``streamproc eval`` entry point.

On the in-repo sample (always) and on the original lab files (when ``../shared`` exists).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from streamproc.cli.evaluate import register

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
LAB = ["--cases", str(SHARED / "seed_cases.jsonl"), "--notes", str(SHARED / "seed_notes.json")]
SOURCES = [
    pytest.param([], id="in-repo-sample"),
    pytest.param(
        LAB,
        id="lab-files",
        marks=pytest.mark.skipif(not SHARED.exists(), reason="no shared lab files here"),
    ),
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    parser = argparse.ArgumentParser(prog="streamproc")
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("source", SOURCES)
def test_agree_matches_the_course(source: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["eval", "agree", *source], capsys)
    assert "supported                   13             0             1" in out
    assert "contradicted                 1             1             0" in out
    assert "unsupported                  0             1             3" in out
    assert "Exact agreement: 17/20 = 85%" in out
    assert "Hallucinated claims caught: 5/6" in out
    assert "False alarms on good claims: 1/14" in out


@pytest.mark.parametrize("source", SOURCES)
def test_score_matches_the_course(source: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["eval", "score", "--penalty", "3", *source], capsys)
    for expected in [
        "12 cases, 20 claims",
        "(faithfulness)                   14/20 = 70%",
        "contradicted / unsupported                         2 / 4",
        "5/10 = 50%, 95% interval 24% to 76%",
        "the same, by the person's labels                                5/10",
        "(citation recall)      93%",
        "(citation precision)             13/19 = 68%",
        "said it can't find it             1/3",
        "wrongly gave up                     1/9",
        "Outcomes: correct 5, abstained 2, wrong 5",
        "Accuracy-only score (wrong costs 0): 5/12",
        "Risk-weighted score (correct +1, abstain 0, wrong -3): -10",
    ]:
        assert expected in out, expected


def test_default_penalty_gives_the_course_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert "wrong -1): +0" in run(["eval", "score"], capsys)


def test_seed_lab_is_sentence_level_even_when_atomic_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = run(["eval", "agree", "--granularity", "atomic"], capsys)
    assert "sentence claims" in out and "Exact agreement: 17/20" in out


def test_check_marks_the_disagreements(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["eval", "check"], capsys)
    assert out.count("<- person said") == 3
    assert "contradicted  cite BAD [D07]  The supplier delivered 80 of 100 pieces." in out
    assert "supported     cite BAD [D09]  The due date is calculated" in out
    assert "Yes, incomplete orders can be billed once they are delivered   <- person said " \
        "contradicted" in out  # fmt: skip
    assert out.count("(abstains: says it can't find the answer)") == 2


def test_report_writes_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.md"
    run(["eval", "score", "--penalty", "3", "--output", str(report)], capsys)
    text = report.read_text(encoding="utf-8")
    assert "| Measure | Result |" in text
    assert "| Citations that pull their weight (citation precision) | 13/19 = 68% |" in text
    assert "Risk-weighted score with penalty 3: -10." in text
