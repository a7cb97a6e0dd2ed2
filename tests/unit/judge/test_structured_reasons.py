"""Every reason the judges give is made from its code and detail (a
:class:`~streamproc.contracts.reasons.Reason`), never a string a consumer would have to
parse: on agents' answers over records and tool results and on the samples, with the
rules judge and the default one."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamproc.contracts.events import AnswerJudgement
from streamproc.contracts.reasons import Reason
from streamproc.evaluate.loaders import load_cases
from streamproc.inference.judges import build_judge
from streamproc.inference.options import JudgeSettings

REPO = Path(__file__).resolve().parents[3]
FILES = [
    REPO / "datasets" / "agent_cases" / "agent_cases.jsonl",
    *sorted((REPO / "streamproc" / "samples").glob("*.answers.jsonl")),
]


def _judged(settings: JudgeSettings, per_file: int) -> list[AnswerJudgement]:
    """``per_file`` answers of each file, spread over it (the agent set is sorted by kind)."""
    judge = build_judge(settings)
    events = []
    for path in FILES:
        cases = load_cases(path)
        events += [case.event for case in cases[:: max(1, len(cases) // per_file)][:per_file]]
    return [j for at in range(0, len(events), 16) for j in judge.judge_batch(events[at : at + 16])]


def _unstructured(judgements: list[AnswerJudgement]) -> list[str]:
    reasons = [r for j in judgements for claim in j.claims for r in claim.reasons]
    assert len(reasons) > 50, "enough reasons to say something"
    return [repr(r) for r in reasons if type(r) is not Reason or not r.code]


def test_the_rules_judge_gives_structured_reasons() -> None:
    assert _unstructured(_judged(JudgeSettings(name="rules"), per_file=200)) == []


@pytest.mark.slow  # the default judge's models
def test_the_default_judge_gives_structured_reasons() -> None:
    assert _unstructured(_judged(JudgeSettings(), per_file=40)) == []
