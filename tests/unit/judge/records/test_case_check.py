"""Level 2a record checks: every reason code, the confirmations, and what is left to NLI."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.judge.records.case_check import MAX_DATE_SEARCHES, CaseChecker, check_record
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
NOW = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)


def record(id_: str, kind: EvidenceKind = EvidenceKind.RECORD, **fields: Any) -> EvidenceItem:
    return EvidenceItem(id=id_, text="", kind=kind, fields=fields)


def call(tool: str, executed: bool, **arguments: Any) -> EvidenceItem:
    outcome = {"result": {"status": "ok"}} if executed else {"outcome": "NOT EXECUTED"}
    return EvidenceItem(
        id=f"{tool}#1",
        text="" if executed else f"NOT EXECUTED: {tool} refused",
        kind=EvidenceKind.TOOL_RESULT,
        executed=executed,
        fields={"tool": tool, "arguments": arguments, **outcome},
    )


def answer_event(answer: str, evidence: list[EvidenceItem]) -> AnswerEvent:
    return AnswerEvent(
        event_id="e",
        answer_id="a",
        conversation_id="c",
        tenant="t",
        assistant_id="s",
        model="m",
        occurred_at=NOW,
        answer=answer,
        evidence=evidence,
    )


def finding(claim: str, evidence: list[EvidenceItem], **kwargs: Any) -> RecordFinding | None:
    return check_record(claim, evidence, answer=answer_event(claim, evidence), **kwargs)


def reason(claim: str, evidence: list[EvidenceItem], **kwargs: Any) -> RecordReason | None:
    found = finding(claim, evidence, **kwargs)
    return found.reason if found else None


# ---------------------------------------------------------------------------- states


def test_a_state_the_record_rules_out_is_contradicted() -> None:
    found = finding("Your order has been shipped.", [ORDER])
    assert found == RecordFinding(
        reason=RecordReason.RECORD_STATE_MISMATCH,
        verdict=VerdictLabel.CONTRADICTED,
        detail="claim says shipped, record R1 status is processing (order lifecycle)",
        evidence_id="R1",
        field="status",
        claim_value="shipped",
        record_value="processing",
    )
    assert reason("Your order is on its way.", [ORDER]) is RecordReason.RECORD_STATE_MISMATCH


def test_the_course_example_issued_while_queued_for_review() -> None:
    refund = record("get_refund", EvidenceKind.TOOL_RESULT, refund={"status": "queued_for_review"})
    found = finding("Your refund of $118.84 has been issued.", [refund])
    assert found is not None
    assert (found.reason, found.field, found.record_value) == (
        RecordReason.RECORD_STATE_MISMATCH,
        "refund.status",
        "queued_for_review",
    )
    same = finding("Your refund is waiting for a review.", [refund])
    assert same is not None and same.confirmed
    negated = finding("Your refund has not been issued yet.", [refund])
    assert negated is not None and negated.confirmed


def test_a_state_that_implies_the_claimed_one_supports_it() -> None:
    parcel = record("TRK-1", status="DELIVERED", tracking="1Z999")
    assert reason("Your parcel has been shipped.", [parcel]) is RecordReason.RECORD_CONFIRMED
    assert reason("Your parcel has not arrived yet.", [parcel]) is (
        RecordReason.RECORD_STATE_MISMATCH
    )


def test_the_state_of_the_thing_the_claim_is_about() -> None:
    booking = record("B1", booking_ref="RSV-11", status="confirmed")
    refund = record("RF1", refund_id="RF-9", status="pending")
    evidence = [booking, refund]
    assert reason("Your booking has been cancelled.", evidence) is (
        RecordReason.RECORD_STATE_MISMATCH
    )
    assert reason("Your refund is still pending.", evidence) is RecordReason.RECORD_CONFIRMED
    # "it" is what the claim before named: the caller checks an answer's claims in order
    checker = CaseChecker()
    event = answer_event("", evidence)
    context = checker.for_answer(event)
    context.check("Your refund RF-9 was requested on Monday.")
    later = context.check("It has been issued.")
    assert later.finding is not None
    assert later.finding.reason is RecordReason.RECORD_STATE_MISMATCH


def test_a_call_that_did_it_outranks_a_lagging_status() -> None:
    done = call("cancel_booking", True, booking_ref="RSV-11")
    booking = record("B1", booking_ref="RSV-11", status="confirmed")
    assert reason("I have cancelled your booking.", [booking, done]) is None


# ---------------------------------------------------------------------- refused calls


def test_a_refused_call_reported_as_done_is_not_executed() -> None:
    found = finding("I have refunded your order.", [ORDER, REFUND])
    assert found is not None
    assert (found.reason, found.verdict, found.evidence_id) == (
        RecordReason.NOT_EXECUTED,
        VerdictLabel.CONTRADICTED,
        "T1",
    )
    assert reason("Your refund has been processed.", [ORDER, REFUND]) is (RecordReason.NOT_EXECUTED)


def test_the_effect_of_a_refused_call_is_read_from_its_name_and_arguments() -> None:
    seat = call("change_seat", False, booking="PNR7", seat="3A")
    flight = record("PNR7", flight="LH 402", seat="17C", status="confirmed")
    evidence = [flight, seat]
    assert reason("I have moved you to seat 3A.", evidence) is RecordReason.NOT_EXECUTED
    assert reason("Your new seat is 3A.", evidence) is RecordReason.NOT_EXECUTED
    stop = call("cancel_transfer", False, transfer_id="TRF-1")
    transfer = record("TRF", transfer_id="TRF-1", status="submitted", amount=50)
    assert reason("I was able to stop your transfer.", [transfer, stop]) is (
        RecordReason.NOT_EXECUTED
    )


def test_saying_the_call_could_not_be_done_is_what_the_record_shows() -> None:
    move = call("reschedule_appointment", False, appointment="A-1", new_date="2026-03-13")
    appointment = record("A-1", appointment_id="A-1", status="scheduled", date="2026-03-10")
    for claim in (
        "I could not move your appointment.",
        "I wasn't able to reschedule your appointment.",
        "Your request to reschedule was declined.",
    ):
        found = finding(claim, [appointment, move])
        assert found is not None and found.confirmed, claim
    assert reason("You asked to move your appointment to 13 March.", [appointment, move]) is None


def test_a_successful_retry_of_the_refused_call_is_not_not_executed() -> None:
    retried = REFUND.model_copy(update={"id": "T2", "executed": True})
    assert reason("I have refunded your order.", [ORDER, REFUND, retried]) is not (
        RecordReason.NOT_EXECUTED
    )


# ------------------------------------------------------------------------------ values


def test_an_amount_no_field_holds_is_contradicted() -> None:
    found = finding("Your order total is €120.", [ORDER])
    assert found is not None
    assert (found.reason, found.field, found.claim_value, found.record_value) == (
        RecordReason.AMOUNT_MISMATCH,
        "total",
        "€120",
        "102.00",
    )
    assert reason("Your order total is €102.", [ORDER]) is RecordReason.RECORD_CONFIRMED


def test_amounts_compare_by_value_and_currency_in_the_locale() -> None:
    total = record("R9", total="2500.00", currency="EUR")
    for claim in ("You paid 2,500.00 EUR.", "You paid 2500 EUR.", "You paid EUR 2.500,00."):
        assert reason(claim, [total]) is RecordReason.RECORD_CONFIRMED, claim
    assert reason("You paid USD 2,500.", [total]) is RecordReason.AMOUNT_MISMATCH
    # an ambiguous "1.200" is 1200 in de_DE and 1.2 in en_US: either reading matches
    german = CaseChecker(locale="de_DE")
    ambiguous = record("R8", total=1200, currency="EUR")
    for checker in (german, CaseChecker()):
        assert reason("You paid EUR 1.200.", [ambiguous], checker=checker) is (
            RecordReason.RECORD_CONFIRMED
        )
    assert reason("You paid EUR 1.300.", [ambiguous], checker=german) is (
        RecordReason.AMOUNT_MISMATCH
    )


def test_an_amount_rounded_as_the_claim_says_is_fair() -> None:
    refund = record("RF", refund_id="RF-1", amount=118.84, currency="EUR")
    assert reason("About 120 euros were refunded to you.", [refund]) is (
        RecordReason.RECORD_CONFIRMED
    )
    assert reason("You were refunded 119 euros.", [refund]) is RecordReason.RECORD_CONFIRMED
    assert reason("You were refunded 118.48 euros.", [refund]) is RecordReason.AMOUNT_MISMATCH


def test_a_limit_or_a_policy_amount_is_no_case_amount() -> None:
    limit = EvidenceItem(id="P2", text="Refunds over EUR 500 need approval.", kind="policy")
    assert reason("Refunds over €500 need approval.", [ORDER, limit]) is None
    assert reason("Your refund needs approval because it is over €100.", [ORDER]) is not (
        RecordReason.AMOUNT_MISMATCH
    )


def test_dates_compare_by_what_the_claim_writes() -> None:
    refund = record("RF", refund_id="RF-1", issued_on="2026-02-10", status="issued")
    for claim in (
        "Your refund was issued on 10 February 2026.",
        "Your refund was issued on Feb 10th.",
        "Your refund was issued on Tuesday.",
    ):
        assert reason(claim, [refund]) is RecordReason.RECORD_CONFIRMED, claim
    found = finding("Your refund was issued on 12 February.", [refund])
    assert found is not None and found.reason is RecordReason.DATE_MISMATCH
    assert found.field == "issued_on"


def test_relative_dates_are_read_against_the_answer_time() -> None:
    parcel = record("P", tracking="1Z1", delivered_at="2026-03-04T15:20:00", status="delivered")
    assert reason("Your parcel was delivered yesterday.", [parcel]) is (
        RecordReason.RECORD_CONFIRMED
    )
    assert reason("Your parcel was delivered today.", [parcel]) is RecordReason.DATE_MISMATCH


def test_times_compare_in_twelve_or_twenty_four_hours() -> None:
    flight = record("F", flight="LH 402", departure="2026-03-12T07:45:00")
    assert reason("Your flight LH 402 leaves at 7:45 am.", [flight]) is (
        RecordReason.RECORD_CONFIRMED
    )
    assert reason("Your flight LH 402 leaves at 09:45.", [flight]) is RecordReason.TIME_MISMATCH
    assert reason("Your flight LH 402 leaves at 7:45 pm.", [flight]) is RecordReason.TIME_MISMATCH


def test_an_identifier_one_digit_off_is_contradicted() -> None:
    found = finding("Your order 4500017312 is being processed.", [ORDER])
    assert found is not None
    assert (found.reason, found.field, found.claim_value, found.record_value) == (
        RecordReason.IDENTIFIER_MISMATCH,
        "order_id",
        "4500017312",
        "4500017311",
    )
    flight = record("F", flight="AC 113", status="confirmed")
    assert reason("You are booked on AC 131.", [flight]) is RecordReason.IDENTIFIER_MISMATCH
    assert reason("You are booked on AC 113.", [flight]) is RecordReason.RECORD_CONFIRMED


def test_counts_compare_with_the_fields_named_like_the_thing() -> None:
    booking = record("B", booking_ref="X1", checked_bags=2, passengers=1)
    assert reason("You have 2 checked bags.", [booking]) is RecordReason.RECORD_CONFIRMED
    assert reason("You have three checked bags.", [booking]) is RecordReason.COUNT_MISMATCH
    po = record("PO-4500017311", po="4500017311", ordered=100, received=90, status="BLOCKED")
    found = finding("The supplier delivered 80 of 100 pieces.", [po])
    assert found is not None and found.reason is RecordReason.COUNT_MISMATCH
    assert (found.claim_value, found.field, found.record_value) == ("80", "received", "90")


def test_names_compare_with_the_fields_of_their_role() -> None:
    visit = record("A", appointment_id="A-7", doctor="Dr. Amara Okafor", clinic="Leeds Central")
    assert reason("Your appointment is with Dr. Okafor.", [visit]) is (
        RecordReason.RECORD_CONFIRMED
    )
    assert reason("Your appointment is with Dr. Adeyemi.", [visit]) is (RecordReason.NAME_MISMATCH)


def test_a_field_that_does_not_parse_is_reported_never_matched() -> None:
    refund = record("RF", refund_id="RF-1", issued_on="sometime in 2026Q1", status="issued")
    event = answer_event("", [refund])
    checked = CaseChecker().for_answer(event).check("Your refund was issued on 10 February.")
    assert not any(c.field == "issued_on" for c in checked.confirmations)
    assert any(n.startswith("FIELD_UNPARSED: RF issued_on") for n in checked.notes)


# ------------------------------------------------------------------- case claims


def test_an_action_no_record_grounds_is_unsupported() -> None:
    found = finding("I've added a 10 EUR voucher to your account.", [ORDER])
    assert found is not None
    assert (found.reason, found.verdict) == (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
        VerdictLabel.UNSUPPORTED,
    )
    assert reason("I have sent you a confirmation email.", [ORDER]) is (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    )
    assert reason("I've checked your order.", [ORDER]) is not (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    )


def test_a_case_claim_without_any_record_is_unsupported() -> None:
    found = finding("Your refund of $118.84 has been issued.", [POLICY])
    assert found is not None
    assert (found.reason, found.verdict) == (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
        VerdictLabel.UNSUPPORTED,
    )
    assert reason("I have cancelled your booking.", []) is RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    assert reason("Refunds are issued within 5 days.", [POLICY]) is None


@pytest.mark.parametrize(
    "claim",
    [
        "Refunds over €500 need approval.",  # a rule with a limit
        "Orders are shipped within 2 days.",  # a rule about orders in general
        "Once your order has shipped, you get an email.",  # a condition
        "Your order will be shipped tomorrow.",  # a promise
        "Thanks for your patience.",
        "The restaurant is closed on Mondays.",  # not about this case
    ],
)
def test_claims_that_are_not_reports_about_the_case_get_no_finding(claim: str) -> None:
    found = finding(claim, [ORDER])
    assert found is None or found.verdict is None
    if "your" not in claim.lower():
        assert finding(claim, [POLICY]) is None


def test_a_listing_given_as_text_is_not_read_as_a_case() -> None:
    business = EvidenceItem(
        id="P1",
        text='{"name": "Killer B\'s", "state": "CA", "city": "Santa Barbara"}',
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


# ------------------------------------------------- names and dates in their own object


def passes(claim: str, evidence: list[EvidenceItem]) -> bool:
    """No finding, or a confirmation: nothing the checks hold against the claim."""
    found = finding(claim, evidence)
    return found is None or found.reason is RecordReason.RECORD_CONFIRMED


SHEETS = [
    record(
        "CHK-1",
        checked_at="2026-02-15 10:20",
        inspected_by="Rocío Navarro",
        customer="Hamza El Idrissi",
    ),
    record("RET-1", inspected_at="2026-02-20 18:05", inspected_by="Javier Molina"),
]


def test_a_name_from_another_object_than_the_claims_date_is_a_name_mismatch() -> None:
    wrong = finding("The car was checked at pick-up on 15 February by Javier Molina.", SHEETS)
    assert wrong is not None and wrong.reason is RecordReason.NAME_MISMATCH
    assert wrong.evidence_id == "CHK-1" and wrong.field == "inspected_by"
    assert passes("Rocío Navarro checked the car on 15 February.", SHEETS)


def test_a_value_every_list_element_shares_anchors_none_of_them() -> None:
    requests = record(
        "REQ",
        requests=[
            {"to": "Mila Novak", "amount": "€42.50", "status": "PAID"},
            {"to": "Hannah Lind", "amount": "€42.50", "status": "PAID"},
        ],
    )
    assert passes("Mila Novak and Hannah Lind have each paid their €42.50.", [requests])


def test_a_place_word_names_the_field_of_that_place() -> None:
    created = EvidenceItem(
        id="create_return#1",
        text="",
        kind=EvidenceKind.TOOL_RESULT,
        fields={
            "tool": "create_return",
            "arguments": {"order": "NL-640288"},
            "result": {"dropoffStore": "Utrecht Centraal", "processedAt": "Tilburg DC"},
        },
    )
    assert reason("You can hand the coat in at our Tilburg store.", [created]) is (
        RecordReason.NAME_MISMATCH
    )
    assert reason("You can hand the coat in at our Utrecht store.", [created])


def test_a_remainder_is_what_the_record_says_remains() -> None:
    block = record("BLK", roomsInBlock=25, roomsPickedUp=17, roomsRemaining=8)
    assert reason("Nine rooms are still open in your block.", [block]) is (
        RecordReason.COUNT_MISMATCH
    )
    assert reason("Eight rooms are still open in your block.", [block])


def test_a_count_is_read_against_the_field_of_the_verb_the_claim_reports() -> None:
    returned = record("WH-1", rma="RB-7410", items_ordered=8, items_received=5)
    assert reason("We've received all eight books from your return RB-7410.", [returned]) is (
        RecordReason.COUNT_MISMATCH
    )
    assert reason("We've received five books from your return RB-7410.", [returned])


def test_a_time_is_read_against_the_field_its_lead_in_names() -> None:
    visit = record("VIS-1", arrival="07:30", visit_date="2026-03-06", firm="Keystone")
    assert reason("The surveyor will arrive tomorrow, 6 March, at 9:30 am.", [visit]) is (
        RecordReason.TIME_MISMATCH
    )
    assert reason("The surveyor will arrive tomorrow, 6 March, at 7:30 am.", [visit])


def test_a_duration_shifts_a_recorded_time_only_where_written_as_a_shift() -> None:
    visit = record("VIS-1", arrival="07:30", visit_date="2026-03-06")
    lasting = "The surveyor arrives at 9:30 am on 6 March and stays about two hours."
    assert reason(lasting, [visit]) is RecordReason.TIME_MISMATCH
    assert reason("Please be ready two hours after 7:30, at 9:30 am on 6 March.", [visit])


def test_hours_written_with_am_or_pm_are_read() -> None:
    order = record("ORD-1", order_no="GR-992641", delivery_window="2026-03-06 18:00")
    assert reason("Your order GR-992641 arrives tomorrow between 8 and 9 pm.", [order]) is (
        RecordReason.TIME_MISMATCH
    )
    assert reason("Your order GR-992641 arrives tomorrow at 6 pm.", [order])


def test_a_title_in_an_answer_without_records_reports_nothing() -> None:
    assert finding("(Till) I Kissed You", []) is None
    assert reason("I have kissed the refund goodbye.", []) is (
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    )


def test_claims_past_the_date_budget_are_named_in_the_limits() -> None:
    booking = record("B1", booking_ref="X1", check_in="2026-03-10")
    context = CaseChecker().for_answer(answer_event("", [booking]))
    for day in range(MAX_DATE_SEARCHES):
        context.check(f"Your stay starts on {day % 28 + 1} March.")
    assert context.limits() == ()
    context.check("Your stay starts on 10 March.")
    assert context.limits() == (
        f"LIMIT_CLAIM_DATES: dates read in {MAX_DATE_SEARCHES} claims only",
    )
