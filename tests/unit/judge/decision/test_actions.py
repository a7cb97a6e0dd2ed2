"""Answer-level decisions: faithfulness, outcome, action and severity."""

from __future__ import annotations

from streamproc.contracts.events import Action, ClaimClass, ClaimVerdict, Outcome, VerdictLabel
from streamproc.judge.decision.actions import decide

S, C, U = VerdictLabel.SUPPORTED, VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED
SENTENCES = ["First.", "Second.", "Third."]


def claim(index: int, verdict: VerdictLabel | None, sentence: int | None = None) -> ClaimVerdict:
    return ClaimVerdict(
        index=index,
        sentence_index=index if sentence is None else sentence,
        text=f"claim {index}",
        start=0,
        end=1,
        claim_class=ClaimClass.RULE if verdict else ClaimClass.CONVERSATIONAL,
        verdict=verdict,
    )


def test_all_supported_passes_and_is_correct() -> None:
    j = decide([claim(0, S), claim(1, None)], SENTENCES, abstained=False, answerable=True)
    assert (j.action, j.outcome, j.hallucinated, j.severity) == (
        Action.PASS, Outcome.CORRECT, False, None
    )  # fmt: skip
    assert (j.checked_claims, j.faithfulness) == (1, 1.0)


def test_some_supported_trims_the_refuted_sentences() -> None:
    j = decide([claim(0, S), claim(1, U), claim(2, C)], SENTENCES, abstained=False, answerable=None)
    assert j.action is Action.TRIM and j.trim_sentences == ["Second.", "Third."]
    assert j.severity == "contradicted" and j.outcome is Outcome.WRONG
    assert (j.contradicted_claims, j.unsupported_claims) == (1, 1)
    assert j.faithfulness == 1 / 3


def test_nothing_supported_survives_withholds() -> None:
    j = decide([claim(0, U), claim(1, U)], SENTENCES, abstained=False, answerable=True)
    assert j.action is Action.WITHHOLD and j.severity == "unsupported" and j.trim_sentences == []


def test_a_supported_half_of_a_refuted_sentence_does_not_survive_the_trim() -> None:
    j = decide([claim(0, S, 0), claim(1, U, 0)], SENTENCES, abstained=False, answerable=True)
    assert j.action is Action.WITHHOLD


def test_abstention_and_answerability() -> None:
    abstained = decide([], SENTENCES, abstained=True, answerable=False)
    assert (abstained.outcome, abstained.action, abstained.faithfulness) == (
        Outcome.ABSTAINED, Action.PASS, None
    )  # fmt: skip
    grounded_but_unanswerable = decide([claim(0, S)], SENTENCES, abstained=False, answerable=False)
    assert grounded_but_unanswerable.outcome is Outcome.WRONG
    live = decide([claim(0, S)], SENTENCES, abstained=False, answerable=None)
    assert live.outcome is Outcome.CORRECT  # unknown answerability counts as answerable
