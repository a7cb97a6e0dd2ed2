"""Which of two dated things came first: read from the evidence's years, not the model."""

from __future__ import annotations

import pytest

from streamproc.contracts.events import VerdictLabel
from streamproc.judge.rules.comparisons import Question, check_comparison, parse_question
from tests.unit.judge.nli.test_judge import event
from tests.unit.judge.nli.test_judge_summaries import calibrator, nli
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

LEDES = (
    "Gerina Dunwich (born December 27, 1959, Illinois, United States) is a professional "
    "astrologer and New Age author.Erich Maria Remarque (born Erich Paul Remark; 22 June "
    "1898 \u2013 25 September 1970) was a German novelist."
)
DEATHS = (
    "Cedric Bassett Popkin (Born 20 June 1890, died 26 January 1968) is considered the "
    "person most likely to have killed Manfred von Richthofen on 21 April 1918.Manfred "
    "Albrecht Freiherr von Richthofen (2 May 1892 \u2013 21 April 1918) was a fighter pilot."
)
FILMS = (
    "Dinosaur is a 2000 American CGI animated adventure film.The Happiest Millionaire is a "
    "1967 musical film starring Fred MacMurray."
)


def ask(question: str) -> Question:
    parsed = parse_question(question)
    assert parsed is not None, question
    return parsed


@pytest.mark.parametrize(
    ("question", "left", "right", "event_kind", "early"),
    [
        ("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?", "Gerina Dunwich",
         "Erich Maria Remarque", "birth", True),
        ("who is younger Joakim Nyström or Kimberly Po ?", "Joakim Nyström", "Kimberly Po",
         "birth", False),
        ("Who passed away first, Manfred von Richthofen or Cedric Popkin ?",
         "Manfred von Richthofen", "Cedric Popkin", "death", True),
        ("Which was released first, Dinosaur or The Happiest Millionaire?", "Dinosaur",
         "Happiest Millionaire", "start", True),
        ("Which ruling Wickard v. Filburn or Roe v. Wade was made first ?",
         "ruling Wickard v. Filburn", "Roe v. Wade", "start", True),
        ("Which film was released earlier, First Blood or Rambo?", "First Blood", "Rambo",
         "start", True),  # "First" in a name is no order word
        ("Of the two American musicians Janet Gardner and Myles Kennedy, who is older?",
         "Janet Gardner", "Myles Kennedy", "birth", True),
    ],
)  # fmt: skip
def test_questions_that_ask_which_came_first(
    question: str, left: str, right: str, event_kind: str, early: bool
) -> None:
    parsed = ask(question)
    assert (parsed.left, parsed.right, parsed.event, parsed.early) == (
        left,
        right,
        event_kind,
        early,
    )


@pytest.mark.parametrize(
    "question",
    [
        "Who was the first president, Washington or Adams?",  # an ordinal, not an order
        "Which nature reserve was established in 1969, Monfragüe or Doñana?",  # no order
        "Who was born earlier, A or B or C?",
        "Who was born earlier?",
        "Which is longer, the Nile or the Amazon?",
        # an order word outside the asking clause ("an earlier lineup") asks nothing
        "Which band recorded an EP with an earlier lineup, toured in 2012, Alpha or Omega?",
    ],
)
def test_other_questions_are_not_comparisons(question: str) -> None:
    assert parse_question(question) is None


def test_a_wrong_pick_is_contradicted_by_the_two_years() -> None:
    question = ask("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?")
    finding = check_comparison(question, "Gerina Dunwich was born earlier.", [("D1", LEDES)])
    assert finding is not None and not finding.holds and finding.whole
    assert finding.reason_text == (
        "COMPARISON_CONTRADICTED: Gerina Dunwich born 1959, after Erich Maria Remarque "
        "born 1898 (D1, D1)"
    )
    assert finding.evidence_ids == ("D1",)


def test_the_bare_pick_and_a_than_clause_are_read_as_picks() -> None:
    question = ask("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?")
    right = check_comparison(question, "Erich Maria Remarque", [("D1", LEDES)])
    assert right is not None and right.holds and right.whole
    reversed_ = check_comparison(
        question, "Gerina Dunwich is younger than Erich Maria Remarque.", [("D1", LEDES)]
    )
    assert reversed_ is not None and reversed_.holds  # the claim's own word decides
    wrong = check_comparison(
        question, "Gerina Dunwich is older than Erich Maria Remarque.", [("D1", LEDES)]
    )
    assert wrong is not None and not wrong.holds


def test_death_years_come_from_died_or_the_life_span() -> None:
    question = ask("Who passed away first, Manfred von Richthofen or Cedric Popkin ?")
    wrong = check_comparison(question, "Cedric Popkin passed away first.", [("D1", DEATHS)])
    assert wrong is not None and not wrong.holds
    assert "Cedric Popkin died 1968, after Manfred von Richthofen died 1918" in wrong.reason_text


def test_the_two_sides_may_be_dated_in_different_items() -> None:
    question = ask("Which was released first, Dinosaur or The Happiest Millionaire?")
    first, second = FILMS.split(".The ")
    items = [("D1", first + "."), ("D2", "The " + second)]
    finding = check_comparison(question, "Dinosaur was released first.", items)
    assert finding is not None and not finding.holds
    assert finding.evidence_ids == ("D1", "D2")


@pytest.mark.parametrize(
    "claim",
    [
        "Gerina Dunwich was not born earlier.",  # negated: left to the verifier
        "Gerina Dunwich was born in Illinois in 1959.",  # a fact, not a pick
        "Both Gerina Dunwich and Erich Maria Remarque wrote books.",
        "The astrologer wrote books on Wicca.",  # names neither side
    ],
)
def test_claims_that_are_not_picks_say_nothing(claim: str) -> None:
    question = ask("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?")
    assert check_comparison(question, claim, [("D1", LEDES)]) is None


def test_nothing_is_said_without_two_different_years() -> None:
    question = ask("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?")
    undated = "Gerina Dunwich is an astrologer. Erich Maria Remarque (born 1898) was a novelist."
    assert check_comparison(question, "Gerina Dunwich", [("D1", undated)]) is None
    same = "Gerina Dunwich (born 1898) is an astrologer. Erich Maria Remarque (born 1898)."
    assert check_comparison(question, "Gerina Dunwich", [("D1", same)]) is None


def test_a_case_name_with_v_is_the_bare_pick() -> None:
    question = ask("Which ruling, Wickard v. Filburn or Roe v. Wade, was made first?")
    evidence = [("D1", "Roe v. Wade, 410 U.S. 113 (1973), was a ruling."), ("D2", FILMS)]
    evidence.append(("D3", "Wickard v. Filburn, 317 U.S. 111 (1942), was a decision."))
    finding = check_comparison(question, "Wickard v. Filburn", evidence)
    assert finding is not None and finding.holds and finding.whole


def test_a_pick_with_more_to_say_is_not_settled_whole() -> None:
    question = ask("Who was born earlier, Gerina Dunwich or Erich Maria Remarque?")
    claim = "Erich Maria Remarque was born earlier and wrote All Quiet on the Western Front."
    finding = check_comparison(question, claim, [("D1", LEDES)])
    assert finding is not None and finding.holds and not finding.whole


def test_the_judge_settles_a_pick_without_the_model(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder, calibrator=calibrator(intercept=-5.0))
    question = "Who was born earlier, Gerina Dunwich or Erich Maria Remarque?"
    evidence = [{"id": "D1", "text": LEDES}]
    wrong, right = judge.judge_batch(
        [
            event("Gerina Dunwich was born earlier.", evidence, question=question),
            event("Erich Maria Remarque was born earlier.", evidence, question=question),
        ]
    )
    [refuted] = wrong.claims
    assert refuted.verdict is VerdictLabel.CONTRADICTED
    assert refuted.reasons[0].startswith("COMPARISON_CONTRADICTED: Gerina Dunwich born 1959")
    assert refuted.evidence_ids == ["D1"]
    assert refuted.risk is None, "no calibrator decided this claim"
    assert wrong.hallucinated
    [confirmed] = right.claims
    assert confirmed.verdict is VerdictLabel.SUPPORTED
    assert confirmed.reasons[0].startswith("COMPARISON_CONFIRMED")
    assert not right.hallucinated


def test_a_right_pick_with_more_to_say_leaves_the_rest_to_the_verifier(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    judge = nli(scorer, embedder, calibrator=calibrator(intercept=5.0))  # flags what it decides
    question = "Who was born earlier, Gerina Dunwich or Erich Maria Remarque?"
    claim = "Erich Maria Remarque was born earlier and wrote for a Berlin daily newspaper."
    [reply] = judge.judge_batch([event(claim, [{"id": "D1", "text": LEDES}], question=question)])
    [decided] = reply.claims
    assert decided.verdict is not VerdictLabel.SUPPORTED, "the years do not vouch for the rest"
    assert decided.risk is not None, "the calibrator decided it"
    assert any(r.startswith("COMPARISON_CONFIRMED") for r in decided.reasons)
