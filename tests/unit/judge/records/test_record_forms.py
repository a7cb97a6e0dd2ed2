"""Records as other systems write them: camel-cased names, amounts in minor units, dates
with dots, status histories, totals of several lines, dates keyed by the state they
schedule; and a claim that restates a policy rather than reporting a deed."""

from __future__ import annotations

from streamproc.contracts.events import EvidenceItem
from streamproc.judge.records.findings import RecordReason

from .test_case_check import call, reason, record

CONFIRMED = RecordReason.RECORD_CONFIRMED


def test_a_camel_cased_name_reads_as_the_claim_writes_it() -> None:
    bag = record("B", file_ref="ZRH-1", delivery={"courier": "SwissBag Express"})
    assert reason("The courier SwissBag Express brings your bag ZRH-1.", [bag]) is CONFIRMED
    assert reason("The courier BagRunner Express brings your bag ZRH-1.", [bag]) is (
        RecordReason.NAME_MISMATCH
    )


def test_amounts_in_minor_units_are_read_in_the_currency() -> None:
    refund = record("RF", refundId="rf_1", amount_minor=38997, currency="USD")
    assert reason("Your refund rf_1 of $389.97 is approved.", [refund]) is CONFIRMED
    assert reason("Your refund rf_1 of $398.97 is approved.", [refund]) is (
        RecordReason.AMOUNT_MISMATCH
    )


def test_a_dotted_date_is_read_day_first() -> None:
    invoice = record("I", inv_no="PR-3318", due_date="05.06.2026")
    assert reason("Invoice PR-3318 is due on 5 June.", [invoice]) is CONFIRMED
    assert reason("Invoice PR-3318 is due on 6 May.", [invoice]) is RecordReason.DATE_MISMATCH


def test_a_status_history_says_what_was_not_what_is() -> None:
    parcel = record(
        "P",
        tracking="1Z9",
        status="DELAYED",
        status_history=[{"status": "IN_TRANSIT"}, {"status": "OUT_FOR_DELIVERY"}],
    )
    assert reason("Your parcel 1Z9 is out for delivery.", [parcel]) is (
        RecordReason.RECORD_STATE_MISMATCH
    )


def test_a_total_of_three_lines_of_one_record_is_worked_out() -> None:
    refund = record(
        "RF",
        refund_no="ERST-1",
        currency="EUR",
        lines=[{"lineTotal": 349.0}, {"lineTotal": 25.9}],
        deduction=4.95,
    )
    assert reason("Refund ERST-1 comes to EUR 369.95 in total.", [refund]) is not (
        RecordReason.AMOUNT_MISMATCH
    )
    assert reason("Refund ERST-1 comes to EUR 396.95 in total.", [refund]) is (
        RecordReason.AMOUNT_MISMATCH
    )


def test_a_state_keyed_by_the_confirmed_date_is_about_that_date() -> None:
    invoice = record(
        "INV",
        InvoiceID="INV-22817",
        Status="OVERDUE",
        NextReminder={"Level": 2, "ScheduledFor": "2026-03-12"},
    )
    assert reason("The next reminder for INV-22817 is scheduled for 12 March.", [invoice]) is not (
        RecordReason.RECORD_STATE_MISMATCH
    )


def test_restating_a_policy_reports_no_deed() -> None:
    policy = EvidenceItem(
        id="P", text="Refunds are completed within 7 working days of initiation.", kind="policy"
    )
    refused = call("expedite_refund", False, refund_ref="RFN-1")
    evidence = [refused, policy]
    assert reason("Refunds are completed within 7 working days of initiation.", evidence) is not (
        RecordReason.NOT_EXECUTED
    )
    assert reason("I have expedited your refund RFN-1.", evidence) is RecordReason.NOT_EXECUTED
