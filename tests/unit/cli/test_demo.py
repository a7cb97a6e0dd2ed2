"""What the demo prints per answer: one outcome word, the action the verdicts carry."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from streamproc.cli.demo import verdict_line
from streamproc.contracts.events import Action, Outcome, Timings, Verdict
from streamproc.inference.options import JudgeSettings
from streamproc.samples import load_sample_answers
from streamproc.wiring import build_judge

JUDGED_AT = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def _verdict_lines() -> dict[str, tuple[Verdict, str]]:
    judge = build_judge(JudgeSettings(name="rules"))
    answers = load_sample_answers()
    lines = {}
    for answer, judgement in zip(answers, judge.judge_batch(answers), strict=True):
        verdict = Verdict(
            event_id=answer.event_id,
            answer_id=answer.answer_id,
            conversation_id=answer.conversation_id,
            tenant=answer.tenant,
            assistant_id=answer.assistant_id,
            model=answer.model,
            occurred_at=answer.occurred_at,
            judged_at=JUDGED_AT,
            judgement=judgement,
            judge=judge.info,
            timings=Timings(judge_ms=1.0, batch_size=len(answers)),
        )
        lines[answer.answer_id] = (verdict, verdict_line(verdict))
    return lines


def test_every_verdict_line_names_one_outcome_in_the_action_vocabulary() -> None:
    lines = _verdict_lines()
    abstaining_trimmed = [
        line
        for verdict, line in lines.values()
        if verdict.judgement.abstained and verdict.judgement.action is Action.TRIM
    ]
    # The case a newcomer met: an answer that abstained and was trimmed.
    assert abstaining_trimmed, "the samples no longer hold an abstaining, trimmed answer"
    actions = {action.value for action in Action}
    other_outcomes = {outcome.value for outcome in Outcome}
    for verdict, line in lines.values():
        words = line.split()
        assert words[0] == "verdict" and words[1] == verdict.answer_id
        assert words[3] == verdict.judgement.action.value and words[3] in actions, line
        rest = set(re.findall(r"[a-z]+", " ".join(words[3:])))
        assert not other_outcomes & rest, line
