"""Level 2a record checks: each reason code, confirmations, and the cases left to NLI."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from streamproc.events import EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.judge.records.amounts import parse_amount
from streamproc.judge.records.case_check import check_record
from streamproc.judge.records.confirmation import confirmed_by_records
from streamproc.judge.records.findings import RecordFinding, RecordReason

ORDER = EvidenceItem(
    id="R1",
    text="Order lookup",
    kind=EvidenceKind.TOOL_RESULT,
    fields={
        "order_id": "4500017311",
        "status": "processing",
        "total": "102.00",
        "currency": "EUR",
        "items": [{"sku": "X-1", "quantity": 2}],
    },
)
REFUND = EvidenceItem(
    id="T1",
    text="Gatekeeper: DENY",
    kind=EvidenceKind.TOOL_RESULT,
    source="issue_refund",
    executed=False,
    fields={"order_id": "4500017311", "amount": 102.0},
)
POLICY = EvidenceItem(id="P1", text="Refunds are issued within 5 days.", kind=EvidenceKind.POLICY)


def reason(claim: str, evidence: list[EvidenceItem]) -> RecordReason | None:
    finding = check_record(claim, evidence)
    return finding.reason if finding else None


def test_a_state_the_record_does_not_hold_is_contradicted() -> None:
    finding = check_record("Your order has been shipped.", [ORDER])
    assert finding == RecordFinding(
        reason=RecordReason.RECORD_STATE_MISMATCH,
        verdict=VerdictLabel.CONTRADICTED,
        detail="claim says shipped, record R1 status is processing",
        evidence_id="R1",
        field="status",
        claim_value="shipped",
        record_value="processing",
    )
    assert finding.reason_text.startswith("RECORD_STATE_MISMATCH: claim says shipped")
    assert not finding.confirmed


def test_the_course_example_issued_while_queued_for_review() -> None:
    refund = EvidenceItem(
        id="get_refund",
        text="",
        kind=EvidenceKind.TOOL_RESULT,
        fields={"refund": {"status": "queued_for_review", "amount": 118.84}},
    )
    finding = check_record("Your refund of $118.84 has been issued.", [refund])
    assert finding is not None
    assert (finding.reason, finding.field, finding.record_value) == (
        RecordReason.RECORD_STATE_MISMATCH,
        "refund.status",
        "queued_for_review",
    )


def test_a_state_about_something_else_is_left_alone() -> None:
    # the order record says nothing about a refund: no finding, NLI decides
    assert check_record("Your refund has been issued.", [ORDER]) is None
    assert reason("Your order is being processed.", [ORDER]) is RecordReason.RECORD_CONFIRMED


def test_a_refused_call_reported_as_done_is_not_executed() -> None:
    finding = check_record("I have refunded your order.", [ORDER, REFUND])
    assert finding is not None
    assert finding.reason is RecordReason.NOT_EXECUTED
    assert finding.verdict is VerdictLabel.CONTRADICTED
    assert (finding.evidence_id, finding.record_value) == ("T1", "not executed")
    assert reason("Your refund has been processed.", [ORDER, REFUND]) is RecordReason.NOT_EXECUTED


def test_saying_the_call_was_refused_is_what_the_record_shows() -> None:
    finding = check_record("Your refund request was declined.", [ORDER, REFUND])
    assert finding is not None and finding.confirmed and finding.evidence_id == "T1"
    assert check_record("I have requested a refund for you.", [ORDER, REFUND]) is None
    assert check_record("I have sent you a confirmation email.", [ORDER, REFUND]) is None


def test_a_successful_retry_of_the_refused_call_is_left_to_nli() -> None:
    retried = REFUND.model_copy(update={"id": "T2", "executed": True})
    assert reason("I have refunded your order.", [ORDER, REFUND, retried]) is None


def test_an_amount_no_field_carries_is_contradicted() -> None:
    finding = check_record("Your order total is €120.", [ORDER])
    assert finding is not None
    assert finding.reason is RecordReason.AMOUNT_MISMATCH
    assert finding.verdict is VerdictLabel.CONTRADICTED
    assert (finding.field, finding.claim_value, finding.record_value) == ("total", "€120", "102.00")


def test_amounts_compare_after_normalisation_and_currency() -> None:
    record = EvidenceItem(
        id="R9", text="", kind=EvidenceKind.RECORD, fields={"total": "1,200.00 USD"}
    )
    assert reason("Your invoice total is $1200.", [record]) is RecordReason.RECORD_CONFIRMED
    assert reason("You were charged 1200 dollars.", [record]) is RecordReason.RECORD_CONFIRMED
    assert reason("You were charged €1,200.", [record]) is RecordReason.AMOUNT_MISMATCH
    assert reason("Your order total is €102.", [ORDER]) is RecordReason.RECORD_CONFIRMED


def test_a_quantity_is_checked_against_quantity_fields() -> None:
    assert reason("You ordered 3 units.", [ORDER]) is RecordReason.AMOUNT_MISMATCH
    assert reason("You ordered 2 units.", [ORDER]) is RecordReason.RECORD_CONFIRMED
    no_quantity = EvidenceItem(id="R2", text="", kind=EvidenceKind.RECORD, fields={"total": 5})
    assert check_record("You ordered 3 units.", [no_quantity]) is None


def test_an_identifier_the_record_does_not_hold_is_contradicted() -> None:
    finding = check_record("Your order 4500017312 is on its way.", [ORDER])
    assert finding is not None
    assert finding.reason is RecordReason.IDENTIFIER_MISMATCH
    assert (finding.field, finding.claim_value, finding.record_value) == (
        "order_id",
        "4500017312",
        "4500017311",
    )
    assert reason("Your order number is 4500017312.", [ORDER]) is RecordReason.IDENTIFIER_MISMATCH


def test_identifiers_compare_up_to_prefix_case_and_separators() -> None:
    po = EvidenceItem(
        id="R3", text="", kind=EvidenceKind.RECORD, fields={"purchase_order_number": "PO-4500"}
    )
    assert reason("Your PO 4500 was received.", [po]) is RecordReason.RECORD_CONFIRMED
    assert reason("Your purchase order po4500 was received.", [po]) is RecordReason.RECORD_CONFIRMED
    assert reason("Your PO-4501 was received.", [po]) is RecordReason.IDENTIFIER_MISMATCH
    # an invoice number says nothing about a record that only holds an order id
    assert check_record("Your invoice INV-77 is ready.", [ORDER]) is None


def test_a_case_claim_without_any_record_is_unsupported() -> None:
    finding = check_record("Your refund of $118.84 has been issued.", [POLICY])
    assert finding is not None
    assert finding.reason is RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    assert finding.verdict is VerdictLabel.UNSUPPORTED
    assert finding.claim_value == "$118.84, issued"
    assert reason("Your order 4500017311 is delayed.", []) is (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    )


def test_a_record_confirms_a_value() -> None:
    finding = check_record("Your order 4500017311 is on its way.", [ORDER])
    assert finding == RecordFinding(
        reason=RecordReason.RECORD_CONFIRMED,
        verdict=None,
        detail="record R1 order_id confirms 4500017311",
        evidence_id="R1",
        field="order_id",
        claim_value="4500017311",
        record_value="4500017311",
    )
    assert finding.confirmed


@pytest.mark.parametrize(
    "claim",
    [
        "Refunds over €500 need approval.",  # a rule with a limit
        "Orders are shipped within 2 days.",  # a rule about orders in general
        "Once your order has shipped, you get an email.",  # a condition
        "Your order has not been shipped yet.",  # negated
        "Your order will be shipped tomorrow.",  # a promise
        "Thanks for your patience.",
        "The restaurant is closed on Mondays.",  # not about this case
    ],
)
def test_claims_that_are_not_reports_about_the_case_get_no_finding(claim: str) -> None:
    assert check_record(claim, [ORDER]) is None
    if "your" not in claim.lower():
        assert check_record(claim, [POLICY]) is None


def test_an_address_state_field_is_no_record_state() -> None:
    business = EvidenceItem(
        id="P1",
        text=json.dumps({"name": "Killer B's", "state": "CA", "city": "Santa Barbara"}),
        kind=EvidenceKind.RECORD,
    )
    assert check_record("Your table has been approved.", [business]) is None


def test_confirmed_by_records_is_the_predicate_for_token_confidence() -> None:
    confirmed = confirmed_by_records([ORDER, REFUND])
    assert confirmed("102.00") and confirmed("€102") and confirmed("102,00 EUR")
    assert not confirmed("$102")  # the record is in euros
    assert confirmed("4500017311") and confirmed("X-1")
    assert not confirmed("4500017312")
    assert not confirmed("March 3")
    refused_only = confirmed_by_records([REFUND])
    assert not refused_only("102")  # a refused call's arguments confirm nothing


def test_parse_amount() -> None:
    assert parse_amount("€1,200.00") == (Decimal("1200.00"), "EUR")
    assert parse_amount("1.200,50 €") == (Decimal("1200.50"), "EUR")
    assert parse_amount("102,50 EUR") == (Decimal("102.50"), "EUR")
    assert parse_amount("12 dollars") == (Decimal("12"), "USD")
    assert parse_amount("7") == (Decimal("7"), None)
    assert parse_amount("A-17") is None
    assert parse_amount("2013-12-18") is None
