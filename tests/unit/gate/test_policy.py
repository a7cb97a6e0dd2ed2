"""The failure policy and the text to send: pure, so every path decides alike."""

from __future__ import annotations

import pytest

from streamproc.contracts.events import Action, UnverifiedReason
from streamproc.gate.policy import answer_text, decide_reply, decision_for, trimmed
from streamproc.judge.decision.actions import not_checked


def test_a_trim_removes_the_sentences_and_keeps_the_rest_exactly() -> None:
    text = "First  holds. Second is wrong.\nThird holds.  Fourth is wrong."
    assert trimmed(text, ["Second is wrong."]) == "First  holds. Third holds.  Fourth is wrong."
    assert trimmed(text, ["Second is wrong.", "Fourth is wrong."]) == "First  holds. Third holds."
    assert trimmed(text, ["Nowhere."]) is None


def test_a_repeated_sentence_is_removed_where_it_stands() -> None:
    assert trimmed("A b. C d. A b. E f.", ["A b.", "A b."]) == "C d. E f."


def test_texts_per_action() -> None:
    assert answer_text("Whole.", Action.PASS, []) == "Whole."
    assert answer_text("Whole.", Action.WITHHOLD, []) == ""


@pytest.mark.parametrize("reason", list(UnverifiedReason))
def test_an_unverified_answer_passes_open_and_is_withheld_closed(reason: UnverifiedReason) -> None:
    judgement = not_checked(reason)
    assert decision_for(judgement, "fail-open") is Action.PASS
    assert decision_for(judgement, "fail-closed") is Action.WITHHOLD
    assert decide_reply("Text.", judgement, "fail-closed").answer_text == ""


def test_a_trim_that_cannot_be_located_withholds() -> None:
    judgement = not_checked(UnverifiedReason.BUDGET_EXCEEDED).model_copy(
        update={"action": Action.TRIM, "trim_sentences": ["Not in it."], "verified": True}
    )
    decided = decide_reply("Something else.", judgement, "fail-open")
    assert (decided.action, decided.answer_text) == (Action.WITHHOLD, "")
