"""No record stops the judge: deep, huge, oddly typed or self-contradicting fields are
typed or skipped, never a crash, and a field that does not parse is never a match."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.judge.nli.judge import NliJudge
from streamproc.judge.records.case_check import CaseChecker
from streamproc.judge.records.case_facts import MAX_FIELDS, durations
from streamproc.judge.records.findings import RecordReason
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

NOW = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)
CLAIMS = (
    "Your order 4500017311 has been shipped.",
    "I have refunded EUR 118.84 to your card on 10 February 2026 at 7:45 am.",
    "Your booking for 3 nights with Dr. Okafor is confirmed for tomorrow.",
    "I've added a 10 EUR voucher to your account.",
)
CHECKER = CaseChecker()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=60),
    st.sampled_from(
        ["2026-02-10", "EUR 1.249,90", "07:45", "queued_for_review", "4500017311", "Dr. Okafor",
         "not a date 2026Q1", "\uff11\uff12\uff13", "\x00", "31/02/2026", "99:99", "NaN",
         "-0", "1e309"]
    ),
)  # fmt: skip
keys = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["status", "amount", "currency", "date", "order_id", "doctor", "nights"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=40,
)


def _event(fields: Any, text: str = "", kind: EvidenceKind = EvidenceKind.RECORD) -> AnswerEvent:
    item = EvidenceItem(id="R1", text=text, kind=kind, fields={"record": fields})
    return AnswerEvent(
        event_id="e",
        answer_id="a",
        conversation_id="c",
        tenant="t",
        assistant_id="s",
        model="m",
        occurred_at=NOW,
        question="What happened to my order?",
        answer=" ".join(CLAIMS),
        evidence=[item],
    )


def _check_all(event: AnswerEvent) -> None:
    context = CHECKER.for_answer(event)
    for claim in CLAIMS:
        found = context.check(claim)
        if found.finding is not None:
            assert found.finding.reason_text.startswith(found.finding.reason.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=values, text=st.text(max_size=200))
def test_any_record_is_read_without_a_crash(fields: Any, text: str) -> None:
    _check_all(_event(fields, text))
    _check_all(_event(fields, text, EvidenceKind.TOOL_RESULT))


def test_a_record_nested_thousands_deep() -> None:
    deep: Any = {"status": "shipped"}
    for _ in range(5_000):
        deep = {"inner": deep}
    _check_all(_event(deep))


def test_ten_thousand_fields_and_hundred_kilobyte_strings() -> None:
    wide = {f"field_{i}": f"value {i}" for i in range(10_000)}
    wide["notes"] = "x" * 100_000
    wide["status"] = "processing"
    event = _event(wide, text="y" * 100_000)
    context = CHECKER.for_answer(event)
    for claim in CLAIMS:
        context.check(claim)
    assert context.facts.capped
    assert any(limit.startswith("LIMIT_RECORD_FIELDS") for limit in context.limits())
    judge = NliJudge(OverlapScorer(), BagOfWordsEmbedder())
    judgement = judge.judge_batch([event])[0]
    assert any(limit.startswith("LIMIT_RECORD_FIELDS") for limit in judgement.limits)
    assert len(context.facts.money) + len(context.facts.quantities) <= MAX_FIELDS * 2


def test_a_record_that_disagrees_with_its_own_text_is_read_by_its_fields() -> None:
    item = EvidenceItem(
        id="R1",
        text="Order 4500017311 was shipped on 2 March and delivered.",
        kind=EvidenceKind.RECORD,
        fields={"order_id": "4500017311", "status": "processing"},
    )
    event = _event({}).model_copy(update={"evidence": [item]})
    found = CHECKER.for_answer(event).check("Your order has been delivered.")
    assert found.finding is not None
    assert found.finding.reason is RecordReason.RECORD_STATE_MISMATCH


@pytest.mark.parametrize(
    "value", ["soon", "2026-13-45", "yesterday-ish", math.inf, float("nan"), [], {}, None, True]
)
def test_a_field_that_does_not_parse_is_never_a_match(value: Any) -> None:
    item = EvidenceItem(
        id="R1",
        text="",
        kind=EvidenceKind.RECORD,
        fields={"refund_id": "RF-1", "issued_on": value, "amount": value, "status": "issued"},
    )
    event = _event({}).model_copy(update={"evidence": [item]})
    found = CHECKER.for_answer(event).check("Your refund of EUR 12 was issued on 10 February.")
    assert not any(c.field in ("issued_on", "amount") for c in found.confirmations)
    if found.finding is not None:
        assert found.finding.verdict is not VerdictLabel.SUPPORTED


@pytest.mark.parametrize(
    "text",
    [
        "Refunds arrive within \u00b2 business days.",
        "Open from \u00b3 pm.",
        "On the \u00b2nd of May.",
    ],
)
def test_digits_that_are_not_decimal_are_read_as_words_not_numbers(text: str) -> None:
    """Superscripts are digits to ``str.isdigit`` but not to ``int``."""
    _check_all(_event({"status": "confirmed", "note": text}, text))
    assert durations(text) == frozenset()
