"""Evidence units: sentences, flattened records, windows, the question - nothing lost."""

from __future__ import annotations

import json

import pytest

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.text.evidence import (
    NOT_EXECUTED_PREFIX,
    QUESTION_ID,
    EvidenceUnit,
    build_units,
    readable_field,
    record_leaves,
    units_for,
)

BUSINESS = {
    "name": "Tinker's Burgers",
    "hours": {"Monday": "11:0-17:0", "Saturday": "11:30-23:0"},
    "attributes": {
        "BusinessParking": {"street": True, "valet": False},
        "RestaurantsTakeOut": True,
        "WiFi": "no",
        "Music": None,
        "Ambience": {},
    },
    "business_stars": 4.0,
    "review_info": [
        {"review_stars": 5.0, "review_text": "Best burgers ever! We came back twice."},
        {"review_stars": 3.0, "review_text": "Slow service."},
    ],
}


def texts(units: list[EvidenceUnit], *, windows: bool = False) -> list[str]:
    return [u.text for u in units if u.is_window is windows]


def test_a_passage_is_split_into_sentences_then_sliding_windows() -> None:
    item = EvidenceItem(id="D1", text="The invoice is blocked. Dr. Smith paid 1.5 percent. Done.")
    units = build_units(None, [item])
    assert [(u.text, u.first, u.last, u.is_window) for u in units] == [
        ("The invoice is blocked.", 0, 0, False),
        ("Dr. Smith paid 1.5 percent.", 1, 1, False),
        ("Done.", 2, 2, False),
        ("The invoice is blocked. Dr. Smith paid 1.5 percent.", 0, 1, True),
        ("Dr. Smith paid 1.5 percent. Done.", 1, 2, True),
    ]
    assert {u.kind for u in units} == {"passage"} and {u.evidence_id for u in units} == {"D1"}


def test_window_size_is_configurable_and_windows_never_cross_items() -> None:
    a = EvidenceItem(id="A", text="One. Two. Three.", kind=EvidenceKind.POLICY)
    b = EvidenceItem(id="B", text="Four.")
    units = build_units(None, [a, b], window_sentences=3)
    assert texts(units, windows=True) == ["One. Two. Three."]
    assert [u.kind for u in units if u.evidence_id == "A"] == ["policy"] * 4
    assert texts(build_units(None, [a], window_sentences=5), windows=True) == ["One. Two. Three."]
    assert texts(build_units(None, [a], window_sentences=1), windows=True) == []
    with pytest.raises(ValueError):
        build_units(None, [a], window_sentences=0)


def test_the_question_is_a_unit_of_its_own() -> None:
    units = build_units("  Why is the invoice blocked?  ", [EvidenceItem(id="D1", text="x.")])
    assert units[0] == EvidenceUnit(QUESTION_ID, "question", "Why is the invoice blocked?", 0, 0)
    assert [u.kind for u in build_units("", [])] == []
    assert build_units(None, []) == []


def test_a_json_business_record_is_flattened_with_readable_names_and_every_value() -> None:
    item = EvidenceItem(id="P1", text=json.dumps(BUSINESS), kind=EvidenceKind.RECORD)
    assert texts(build_units(None, [item])) == [
        "name: Tinker's Burgers",
        "hours Monday: 11:00-17:00",
        "hours Saturday: 11:30-23:00",
        "attributes business parking street: yes",
        "attributes business parking valet: no",
        "attributes restaurants take out: yes",
        "attributes WiFi: no",
        "attributes Music: unknown",
        "attributes Ambience: none",
        "business stars: 4.0",
        "review info 1 stars: 5.0",
        "review info 1 text: Best burgers ever!",
        "We came back twice.",
        "review info 2 stars: 3.0",
        "review info 2 text: Slow service.",
    ]


def test_record_windows_join_field_lines_readably() -> None:
    item = EvidenceItem(id="P1", text=json.dumps({"hours": BUSINESS["hours"]}))
    assert texts(build_units(None, [item]), windows=True) == [
        "hours Monday: 11:00-17:00; hours Saturday: 11:30-23:00"
    ]


def test_fields_of_a_record_become_sentences_after_its_text() -> None:
    item = EvidenceItem(
        id="R1",
        text="Order lookup.",
        kind=EvidenceKind.TOOL_RESULT,
        fields={"order_id": "4500017311", "status": "processing", "tags": ["rush", "gift"]},
    )
    units = build_units(None, [item])
    assert texts(units) == [
        "Order lookup.",
        "order id: 4500017311",
        "status: processing",
        "tags: rush, gift",
    ]
    assert {u.kind for u in units} == {"tool_result"}


def test_text_that_repeats_the_fields_is_not_doubled() -> None:
    fields = {"order_id": "A-1", "total": 102.0}
    item = EvidenceItem(id="R1", text=json.dumps(fields), kind=EvidenceKind.RECORD, fields=fields)
    assert texts(build_units(None, [item])) == ["order id: A-1", "total: 102.0"]


def test_a_refused_call_says_so_in_every_unit() -> None:
    item = EvidenceItem(
        id="T1",
        text="issue_refund(order=A-1)",
        kind=EvidenceKind.TOOL_RESULT,
        executed=False,
        fields={"amount": 50},
    )
    units = build_units(None, [item])
    assert all(u.text.startswith(NOT_EXECUTED_PREFIX) for u in units)
    assert texts(units)[1] == NOT_EXECUTED_PREFIX + "amount: 50"


def test_nothing_is_truncated_a_long_sentence_stays_whole() -> None:
    long_sentence = "The supplier " + " and ".join(f"delivered part {i}" for i in range(800)) + "."
    review = " ".join(f"Sentence number {i} of the review." for i in range(300))
    item = EvidenceItem(id="D1", text=long_sentence + " Short one.")
    record = EvidenceItem(id="R1", text=json.dumps({"review": review}), kind=EvidenceKind.RECORD)
    units = build_units(None, [item, record])
    assert texts(units)[0] == long_sentence
    assert len(long_sentence) > 10_000
    record_sentences = [u.text for u in units if u.evidence_id == "R1" and not u.is_window]
    assert len(record_sentences) == 300
    assert " ".join(record_sentences) == "review: " + review


def test_readable_field_names() -> None:
    assert readable_field("business_stars") == "business stars"
    assert readable_field("RestaurantsTakeOut") == "restaurants take out"
    assert readable_field("orderId") == "order id"
    assert readable_field("HTTPStatus") == "http status"
    assert readable_field("Monday") == "Monday"
    assert readable_field("WiFi") == "WiFi"


def test_record_leaves_keep_paths_for_auditors() -> None:
    item = EvidenceItem(id="P1", text=json.dumps(BUSINESS))
    leaves = {leaf.name: leaf.value for leaf in record_leaves(item)}
    assert leaves["hours.Monday"] == "11:0-17:0"  # the value as given, not as rendered
    assert leaves["review_info[1].review_stars"] == 3.0
    assert leaves["attributes.Music"] is None
    assert leaves["attributes.Ambience"] == ()  # an empty object
    plain = EvidenceItem(id="D1", text="{not json")
    assert record_leaves(plain) == []


def test_units_for_selects_the_cited_items_and_the_question() -> None:
    evidence = [EvidenceItem(id="D1", text="One."), EvidenceItem(id="D2", text="Two. Three.")]
    units = build_units("Why?", evidence)
    assert texts(units_for(["D2"], units)) == ["Why?", "Two.", "Three."]
    assert texts(units_for(["D2"], units), windows=True) == ["Two. Three."]
    assert texts(units_for(["D1"], units, include_question=False)) == ["One."]
    assert units_for([], units, include_question=False) == []


def test_a_repeated_sentence_is_kept_each_time() -> None:
    item = EvidenceItem(id="D1", text='He cried "Mommy! Daddy! Mommy! Daddy!" and stopped.')
    assert texts(build_units(None, [item])) == [
        'He cried "Mommy!',
        "Daddy!",
        "Mommy!",
        'Daddy!" and stopped.',
    ]
