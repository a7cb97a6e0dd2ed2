"""Claim decomposition: sentences, atomic splits, citations, spans, abstention, chit-chat."""

from __future__ import annotations

import pytest

from streamproc.contracts.events import ClaimClass, EvidenceItem, EvidenceKind
from streamproc.judge.text.claims import asserts, decompose, split_sentences

NOTES = [EvidenceItem(id=f"D0{i}", text=f"note {i}") for i in range(1, 4)]


def sentences(answer: str) -> list[str]:
    return [answer[s:e] for s, e in split_sentences(answer)]


def test_sentences_do_not_break_on_decimals_abbreviations_or_ids() -> None:
    answer = (
        "At 1.5 percent, Dr. Smith of the U.S. office releases it, e.g. Orion's order. "
        "Error PRC-112 on order No. 4500017311 is fixed! Is it done? Yes."
    )
    assert sentences(answer) == [
        "At 1.5 percent, Dr. Smith of the U.S. office releases it, e.g. Orion's order.",
        "Error PRC-112 on order No. 4500017311 is fixed!",
        "Is it done?",
        "Yes.",
    ]


def test_a_case_name_is_one_sentence() -> None:
    assert sentences("Roe v. Wade came after Wickard v. Filburn. It was 1973.") == [
        "Roe v. Wade came after Wickard v. Filburn.",
        "It was 1973.",
    ]


def test_line_breaks_and_list_markers_end_sentences() -> None:
    answer = "Here is a summary:\n\n- The invoice is blocked\n2. The supplier was asked."
    assert sentences(answer) == [
        "Here is a summary:",
        "The invoice is blocked",
        "The supplier was asked.",
    ]


def test_a_citation_after_the_full_stop_stays_with_its_sentence() -> None:
    answer = "The invoice is blocked. [D01] The supplier was asked [D02]."
    shape = decompose(answer, NOTES)
    assert [c.cited_ids for c in shape.claims] == [("D01",), ("D02",)]
    assert [c.text for c in shape.claims] == ["The invoice is blocked.", "The supplier was asked."]


def test_citations_are_stripped_kept_per_claim_and_spans_point_into_the_answer() -> None:
    answer = "The supplier delivered 80 of 100 pieces [D01]. The invoice stays blocked [D02, D03]."
    shape = decompose(answer, NOTES, "sentence")
    first, second = shape.claims
    assert first.text == "The supplier delivered 80 of 100 pieces."
    assert second.citations == ("D02", "D03") and second.cited_ids == ("D02", "D03")
    assert answer[first.start : first.end] == "The supplier delivered 80 of 100 pieces [D01]."
    assert answer[second.start : second.end].startswith("The invoice stays blocked")
    assert (first.sentence_index, second.sentence_index) == (0, 1)
    assert shape.uses_citations


def test_numeric_citations_use_an_id_first_then_the_position() -> None:
    evidence = [EvidenceItem(id="a", text="x"), EvidenceItem(id="3", text="y")]
    shape = decompose("It is blocked [3]. It is paid [1]. It is late [7].", evidence)
    assert [c.cited_ids for c in shape.claims] == [("3",), ("a",), ()]
    assert shape.claims[2].unresolved == ("7",)


def test_atomic_splits_two_statements_but_not_a_list() -> None:
    answer = (
        "The invoice was blocked for payment, and accounts payable asked the supplier "
        "for a credit memo [D01]. The menu has burgers, fries, and grilled chicken sandwiches."
    )
    atomic = decompose(answer, NOTES, "atomic").claims
    assert [c.text for c in atomic] == [
        "The invoice was blocked for payment",
        "accounts payable asked the supplier for a credit memo.",
        "The menu has burgers, fries, and grilled chicken sandwiches.",
    ]
    assert [c.sentence_index for c in atomic] == [0, 0, 1]
    assert atomic[0].cited_ids == ("D01",)  # the sentence-final citation covers both halves
    assert answer[atomic[1].start : atomic[1].end].startswith("accounts payable")
    assert len(decompose(answer, NOTES, "sentence").claims) == 2


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        ("the supplier will send a credit memo", True),
        ("it is cheap", True),
        ("the buyer contacts the vendor", True),
        ("shakes", False),
        ("grilled chicken sandwiches", False),
        ("also offers a wide variety of salads", False),
        ("gelato, which is made fresh every day", False),
        ("for Samoans to be granted citizenship", False),
        ("that he was motivated by revenge", False),
    ],
)
def test_both_halves_must_assert(piece: str, expected: bool) -> None:
    assert asserts(piece) is expected


def test_semicolon_split_and_oxford_comma_list() -> None:
    answer = "It has burgers, fries, and shakes; it is cheap."
    assert [c.text for c in decompose(answer, NOTES, "atomic").claims] == [
        "It has burgers, fries, and shakes",
        "it is cheap.",
    ]


def test_abstention_is_not_a_claim_and_marks_the_answer() -> None:
    shape = decompose(
        "I can't find the credit limit of customer 10023 in the retrieved notes.", NOTES
    )
    assert shape.claims == () and shape.abstained
    shape = decompose("The order is blocked. The documents do not mention why.", NOTES)
    assert [c.text for c in shape.claims] == ["The order is blocked."] and shape.abstained


def test_conversational_sentences_are_kept_but_not_checked() -> None:
    answer = (
        "Thanks for reaching out! Here is a summary: The invoice is blocked. "
        "Let me know if you need anything else."
    )
    shape = decompose(answer, NOTES)
    classes = [(c.text, c.claim_class) for c in shape.claims]
    assert classes == [
        ("Thanks for reaching out!", ClaimClass.CONVERSATIONAL),
        ("Here is a summary:", ClaimClass.CONVERSATIONAL),
        ("The invoice is blocked.", ClaimClass.RULE),
        ("Let me know if you need anything else.", ClaimClass.CONVERSATIONAL),
    ]
    assert [c.checked for c in shape.claims] == [False, False, True, False]


def test_record_class_needs_an_identifier_and_record_evidence() -> None:
    answer = "Invoice 5105600123 is blocked. Blocked invoices are not paid."
    passages = decompose(answer, NOTES).claims
    record = EvidenceItem(id="R1", text="...", kind=EvidenceKind.TOOL_RESULT)
    with_record = decompose(answer, [record]).claims
    assert [c.claim_class for c in passages] == [ClaimClass.RULE, ClaimClass.RULE]
    assert [c.claim_class for c in with_record] == [ClaimClass.RECORD, ClaimClass.RULE]


def test_empty_and_citation_only_answers_have_no_claims() -> None:
    assert decompose("", NOTES).claims == ()
    assert decompose("   \n [D01]. ", NOTES).claims == ()


def test_a_meta_lead_in_is_split_off_and_not_checked() -> None:
    """ "Here is a summary in 75 words:" is conversation; the claim after it stands alone
    (checked on its own words, so the lead-in cannot become a hidden signal)."""
    shape = decompose("Here is a summary in 75 words: The council approved the plan.", [], "atomic")
    assert [(c.text, c.checked) for c in shape.claims] == [
        ("Here is a summary in 75 words:", False),
        ("The council approved the plan.", True),
    ]
    ratio = decompose("The ratio is 3:1 here.", [], "atomic")
    assert [c.text for c in ratio.claims] == ["The ratio is 3:1 here."]
