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


def test_the_particle_of_a_phrasal_verb_is_no_thing_done() -> None:
    parcel = record("T", pin="7023114588", events=[{"desc": "Item accepted", "loc": "Montreal"}])
    claim = "Your parcel (Canada Post 7023114588) was dropped off in Montreal on Monday."
    assert reason(claim, [parcel]) is not RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE


def test_a_range_of_days_allows_either_end() -> None:
    refund = record("R", refund_no="RF-9", initiated="2026-03-02", status="initiated")
    policy = EvidenceItem(
        id="P", text="Refunds appear within 1-2 business days of being initiated.", kind="policy"
    )
    for day in ("3 March", "4 March"):
        claim = f"Refund RF-9 should be on your account by {day}."
        assert reason(claim, [refund, policy]) is not RecordReason.DATE_MISMATCH, claim


def test_the_first_few_of_the_things_are_not_their_number() -> None:
    stay = record("H", res="LX-8842", nights=[{"rate": 142.0}, {"rate": 142.0}, {"rate": 168.5}])
    assert reason("For LX-8842 the first two nights are EUR 142 each.", [stay]) is not (
        RecordReason.COUNT_MISMATCH
    )
    assert reason("Reservation LX-8842 is for two nights.", [stay]) is RecordReason.COUNT_MISMATCH


def test_a_relative_day_is_read_where_the_claim_names_the_date_field() -> None:
    # the answer's time is 5 March 2026 (``NOW``)
    invoice = record("I", inv_no="PR-1", due_date="2026-03-07")
    assert reason("Invoice PR-1 has its due date tomorrow.", [invoice]) is (
        RecordReason.DATE_MISMATCH
    )
    assert reason("Invoice PR-1 is something to sort out tomorrow.", [invoice]) is not (
        RecordReason.DATE_MISMATCH
    )


def test_an_eta_is_an_arrival_and_a_second_before_midnight_is_midnight() -> None:
    stay = record("H", booking="BLQ-31", arrival="2026-03-05")
    update = call("update_arrival", True, booking="BLQ-31", eta="2026-03-06T15:00")
    claim = "Booking BLQ-31 now shows you arrive tomorrow."
    assert reason(claim, [stay, update]) is not RecordReason.DATE_MISMATCH
    access = record("A", workspace="WS-1", access_until="2026-03-05T23:59:59")
    assert reason("Workspace WS-1 stays open until midnight tonight.", [access]) is not (
        RecordReason.TIME_MISMATCH
    )


def test_a_local_time_with_its_zone_name_is_read() -> None:
    hold = record("H", ref="WBY-P-44", holdExpiresAt="2026-03-05 23:47 Europe/London")
    assert reason("Reference WBY-P-44 is held until 11:47 pm tonight.", [hold]) is CONFIRMED
    assert reason("Reference WBY-P-44 is held until 10:47 pm tonight.", [hold]) is (
        RecordReason.TIME_MISMATCH
    )


def test_amounts_of_separate_records_are_worked_out_together() -> None:
    # the payment's currency is a field's value ("EUR"), its key German ("waehrung")
    invoice = record("I", rechnungsnr="RE-4417", brutto="EUR 3.867,50")
    credit = record("G", gutschrift_nr="GS-91", brutto="EUR 581,91")
    paid = record("Z", beleg="ZE-88", betrag=1000.0, waehrung="EUR")
    evidence = [invoice, credit, paid]
    assert reason("That leaves EUR 2,285.59 open on RE-4417.", evidence) is not (
        RecordReason.AMOUNT_MISMATCH
    )


def test_a_deadline_is_counted_back_from_a_recorded_day() -> None:
    block = record("G", codigo="GRP-LO-0620", chegada="19.06.2026")
    policy = EvidenceItem(
        id="P", text="The final rooming list is due 21 days before arrival.", kind="policy"
    )
    claim = "For GRP-LO-0620 we need the final rooming list by 29 May."
    assert reason(claim, [block, policy]) is not RecordReason.DATE_MISMATCH


def test_a_name_beside_a_value_only_its_object_holds_is_in_its_place() -> None:
    claim_record = record(
        "S",
        schadennr="SCH-1184",
        posten=[
            {"art": "repair", "firma": "Autoschade Van Dijk", "bedrag": "EUR 1.865,50"},
            {"art": "towing", "firma": "Sleepdienst Bakker", "bedrag": "EUR 174,50"},
        ],
    )
    claim = (
        "On SCH-1184 the repair at Autoschade Van Dijk (EUR 1,865.50) and the towing "
        "(EUR 174.50) are on file."
    )
    assert reason(claim, [claim_record]) is not RecordReason.NAME_MISMATCH


def test_a_refused_calls_error_is_not_what_it_asked_for() -> None:
    refused = EvidenceItem(
        id="modifier_email#1",
        text="ERROR 409 OTP_EXPIRED",
        kind="tool_result",
        executed=False,
        fields={
            "tool": "modifier_email",
            "arguments": {"code": "583104", "nouvel_email": "c.dumont@example.org"},
            "http_status": 409,
            "error": {"code": "OTP_EXPIRED"},
        },
    )
    account = record("A", ref_client="AZ-0093", email="c.d@example.org")
    evidence = [account, refused]
    claim = "We texted you a code for AZ-0093 at 4:09 pm, and it expired after 10 minutes."
    assert reason(claim, evidence) is not RecordReason.NOT_EXECUTED
    assert reason("Your email is now c.dumont@example.org.", evidence) is (
        RecordReason.NOT_EXECUTED
    )


def test_a_new_value_is_the_one_said_to_hold_now() -> None:
    order = record("O", order_id="SHS-77", paid="INR 4,899", price_now="INR 3,999")
    refused = call("request_price_adjustment", False, order_id="SHS-77", claimed_diff=900)
    evidence = [order, refused]
    claim = "Order SHS-77 is now listed at INR 3,999, but that INR 900 drop is a clearance sale."
    assert reason(claim, evidence) is not RecordReason.NOT_EXECUTED
    assert reason("For order SHS-77 INR 900 is now back on your card.", evidence) is (
        RecordReason.NOT_EXECUTED
    )


def test_a_recorded_moment_reads_in_the_zone_the_claim_names() -> None:
    visit = record("V", termin="TRM-55", beginn="2026-03-06T09:30:00+01:00")
    assert reason("TRM-55 starts at 9:30 Berlin time, 4:30 pm in Singapore.", [visit]) is (
        CONFIRMED
    )
    assert reason("TRM-55 starts at 9:30 Berlin time, 5:30 pm in Singapore.", [visit]) is (
        RecordReason.TIME_MISMATCH
    )


def test_a_utc_moment_reads_in_the_zone_the_records_hold() -> None:
    payment = record(
        "P", pmtId="SP-7F3", scheduledFor="2026-03-16T14:00:00Z", userTz="America/New_York"
    )
    assert reason("Payment SP-7F3 goes out on March 16 at 10:00 a.m.", [payment]) is CONFIRMED
    claim = "You can edit SP-7F3 until 9:00 a.m. on March 16, an hour before it is sent."
    assert reason(claim, [payment]) is not RecordReason.TIME_MISMATCH


def test_the_hour_of_pm_is_the_number_next_to_it() -> None:
    hold = record("H", shipment="9031", pickup_from="2026-03-06T14:00:00")
    assert reason("Parcel 9031 can be collected on Friday 6 March from 2 pm.", [hold]) is (
        CONFIRMED
    )


def test_change_and_update_name_one_deed() -> None:
    order = record("O", order_no="0099-72", ship_to={"city": "Harrogate"})
    updated = call("update_shipping_address", True, order_no="0099-72", city="Leeds")
    claim = "I've changed the delivery address on 0099-72 to Leeds."
    assert reason(claim, [order, updated]) is not RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE
    refused = call("update_shipping_address", False, order_no="0099-72", city="Leeds")
    assert reason(claim, [order, refused]) is RecordReason.NOT_EXECUTED


def test_a_past_day_is_recorded_not_forecast_from_a_policy() -> None:
    # the answer's time is Thursday 5 March 2026 (``NOW``)
    policy = EvidenceItem(id="P1", text="Transfers arrive within 1 business day.", kind="policy")
    sent = record("P", payment_ref="PM-77", initiated="2026-03-03", status="completed")
    assert reason("Payment PM-77 was completed yesterday.", [sent, policy]) is (
        RecordReason.DATE_MISMATCH
    )
    today = record("P", payment_ref="PM-77", initiated="2026-03-05", status="initiated")
    assert reason("Payment PM-77 should reach them by Friday 6 March.", [today, policy]) is not (
        RecordReason.DATE_MISMATCH
    )


def test_a_date_before_a_colon_is_read() -> None:
    # the answer's time is Thursday 5 March 2026 (``NOW``)
    benefit = record("C", claim="HC-119", paid="2026-03-02", status="paid", total="GBP 300")
    assert reason("Claim HC-119 was paid last Friday: GBP 300 in all.", [benefit]) is (
        RecordReason.DATE_MISMATCH
    )


def test_items_holding_a_key_count_that_thing() -> None:
    trip = record(
        "T",
        pnr="M3WDHK",
        segments=[
            {"flight": "LH 1207", "route": "GVA-FRA"},
            {"flight": "4Y 176", "route": "FRA-WDH"},
        ],
    )
    assert reason("Trip M3WDHK is two flights on one ticket.", [trip]) is not (
        RecordReason.COUNT_MISMATCH
    )
    assert reason("Trip M3WDHK is three flights on one ticket.", [trip]) is (
        RecordReason.COUNT_MISMATCH
    )
