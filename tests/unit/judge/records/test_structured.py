"""Structured evidence compared as values: hours, attributes, ratings, counts, places."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.records.structured import StructuredEvidence, ValueFinding, ValueReason

MISMATCH = ValueReason.VALUE_MISMATCH
MISSING = ValueReason.FIELD_NOT_IN_RECORD
CONFIRMED = ValueReason.VALUE_CONFIRMED

EVERY_DAY = {
    day: "11:0-17:0"
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
}
BUSINESS: dict[str, Any] = {
    "name": "Tinker's Burgers",
    "address": "2275 Ortega Hill Rd, Ste C",
    "city": "Summerland",
    "state": "CA",
    "categories": "Burgers, Restaurants",
    "hours": EVERY_DAY,
    "attributes": {
        "BusinessParking": {
            "valet": False, "garage": False, "street": True, "lot": False, "validated": False,
        },
        "RestaurantsReservations": False,
        "OutdoorSeating": True,
        "WiFi": "no",
        "RestaurantsTakeOut": True,
        "RestaurantsGoodForGroups": True,
        "Music": None,
        "Ambience": {"touristy": False, "divey": True, "classy": True, "casual": False},
    },
    "business_stars": 4.0,
    "review_info": [
        {"review_stars": 5.0, "review_date": "2022-01-16", "review_text": "Great burgers."},
        {"review_stars": 3.0, "review_date": "2021-12-02", "review_text": "Slow service."},
    ],
}  # fmt: skip


def record(data: dict[str, Any] | None = None, **changes: Any) -> StructuredEvidence:
    """The business above (or ``data``) as Data2txt delivers it: JSON passage text."""
    body = dict(BUSINESS if data is None else data, **changes)
    return StructuredEvidence.from_items([EvidenceItem(id="doc-1", text=json.dumps(body))])


def reasons(findings: list[ValueFinding]) -> dict[str, ValueReason]:
    return {f.field: f.reason for f in findings}


def only(findings: list[ValueFinding], reason: ValueReason) -> list[ValueFinding]:
    return [f for f in findings if f.reason is reason]


# ----------------------------------------------------------------------------- hours


def test_day_range_with_12h_clock_is_a_mismatch_against_every_day() -> None:
    findings = record().compare(
        "The business is open from Monday to Sunday from 11:00 am to 7:00 pm."
    )
    assert len(findings) == 1
    finding = findings[0]
    assert finding.reason is MISMATCH
    assert finding.field == "hours.Monday"
    assert finding.claimed == "Monday-Sunday 11:00-19:00"
    assert finding.recorded == "11:00-17:00"
    assert finding.reason_text == (
        "VALUE_MISMATCH: hours.Monday claimed Monday-Sunday 11:00-19:00, record 11:00-17:00 (doc-1)"
    )


@pytest.mark.parametrize(
    "claim",
    [
        "It is open daily from 11 am to 5 pm.",
        "It is open every day from 11:00 to 17:00.",
        "The restaurant is open from 11:00 AM to 5:00 PM every day of the week.",
        "Opening hours are 11am-5pm, seven days a week.",
    ],
)
def test_every_day_phrasings_confirm_matching_hours(claim: str) -> None:
    findings = record().compare(claim)
    assert [f.reason for f in findings] == [CONFIRMED]
    assert findings[0].claimed == "Monday-Sunday 11:00-17:00"


def test_weekdays_and_weekends_are_checked_separately() -> None:
    hours = dict(EVERY_DAY, Saturday="10:0-22:0", Sunday="10:0-22:0")
    findings = record(hours=hours).compare(
        "It is open 11 am to 5 pm on weekdays and 10 am to 11 pm on weekends."
    )
    assert {(f.field, f.reason) for f in findings} == {
        ("hours.Monday", CONFIRMED),
        ("hours.Saturday", MISMATCH),
    }


def test_a_day_missing_from_the_hours_is_closed() -> None:
    hours = {d: v for d, v in EVERY_DAY.items() if d != "Monday"}
    evidence = record(hours=hours)
    wrong = evidence.compare("They are open Monday through Friday from 11 am to 5 pm.")
    assert [(f.reason, f.field) for f in wrong] == [(MISMATCH, "hours.Monday")]
    assert wrong[0].recorded == "Monday closed; Tuesday-Friday 11:00-17:00"
    assert [f.reason for f in evidence.compare("They are closed on Mondays.")] == [CONFIRMED]
    assert [f.reason for f in evidence.compare("They are closed on Tuesdays.")] == [MISMATCH]
    assert [f.reason for f in evidence.compare("The cafe is open seven days a week.")] == [MISMATCH]


def test_overnight_closing_reads_as_the_next_morning() -> None:
    evidence = record(hours=dict(EVERY_DAY, Friday="11:30-1:0"))
    assert [f.reason for f in evidence.compare("On Fridays it is open from 11:30 am to 1 am.")] == [
        CONFIRMED
    ]
    wrong = evidence.compare("On Fridays it is open from 11:30 AM to 1:00 PM.")
    assert [(f.reason, f.recorded) for f in wrong] == [(MISMATCH, "11:30-01:00")]


def test_closing_time_alone_is_compared() -> None:
    evidence = record(hours=dict(EVERY_DAY, Saturday="11:0-23:0", Sunday="11:0-23:0"))
    assert [f.reason for f in evidence.compare("It stays open until 11 pm on weekends.")] == [
        CONFIRMED
    ]
    assert [f.reason for f in evidence.compare("It stays open until 10 pm on weekends.")] == [
        MISMATCH
    ]


def record_reading(zero_length_hours: str, **changes: Any) -> StructuredEvidence:
    body = dict(BUSINESS, **changes)
    item = EvidenceItem(id="doc-1", text=json.dumps(body))
    return StructuredEvidence.from_items([item], zero_length_hours)  # type: ignore[arg-type]


def test_a_0_0_day_next_to_real_hours_reads_closed() -> None:
    """Yelp writes a closed Monday "0:0-0:0"; answers and annotators read it so."""
    evidence = record(hours=dict(EVERY_DAY, Monday="0:0-0:0"))
    assert [f.reason for f in evidence.compare("It is closed on Mondays.")] == [CONFIRMED]
    wrong = evidence.compare("The restaurant is open seven days a week.")
    assert [(f.reason, f.field) for f in wrong] == [(MISMATCH, "hours.Monday")]
    assert "Monday closed" in str(wrong[0].recorded)
    assert [f.reason for f in evidence.compare("It is open from Tuesday to Sunday.")] == [CONFIRMED]


def test_0_0_on_every_day_is_never_judged() -> None:
    """A business closed all week is not what "0:0-0:0" everywhere says: unknown."""
    evidence = record(hours=dict.fromkeys(EVERY_DAY, "0:0-0:0"))
    assert evidence.compare("It is closed on Mondays.") == []
    assert evidence.compare("It is open seven days a week.") == []


def test_0_0_read_as_unknown_when_configured() -> None:
    evidence = record_reading("unknown", hours=dict(EVERY_DAY, Monday="0:0-0:0"))
    assert evidence.compare("It is closed on Mondays.") == []
    assert evidence.compare("It is open from Monday to Sunday.") == []
    wrong = evidence.compare("It is open from Monday to Sunday, 9 am to 5 pm.")
    assert [(f.reason, f.field) for f in wrong] == [(MISMATCH, "hours.Tuesday")]


def test_hours_claim_without_hours_in_the_record() -> None:
    findings = record(hours=None).compare("It is open daily from 9 am to 5 pm.")
    assert [(f.reason, f.field, f.recorded) for f in findings] == [(MISSING, "hours", None)]


def test_meal_times_are_not_opening_hours() -> None:
    assert record().compare("They serve breakfast from 7 am to 11 am on weekdays.") == []


# ------------------------------------------------------------------------ attributes


@pytest.mark.parametrize(
    ("claim", "field", "reason"),
    [
        ("The business has a valet parking option.", "attributes.BusinessParking.valet",
         MISMATCH),
        ("Valet parking is not available.", "attributes.BusinessParking.valet", CONFIRMED),
        ("The restaurant takes reservations.", "attributes.RestaurantsReservations", MISMATCH),
        ("The restaurant does not take reservations.", "attributes.RestaurantsReservations",
         CONFIRMED),
        ("WiFi is not available.", "attributes.WiFi", CONFIRMED),
        ("Guests can enjoy free WiFi.", "attributes.WiFi", MISMATCH),
        ("It offers outdoor seating.", "attributes.OutdoorSeating", CONFIRMED),
        ("It doesn't offer takeout.", "attributes.RestaurantsTakeOut", MISMATCH),
    ],
)  # fmt: skip
def test_yes_no_attributes_with_negation(claim: str, field: str, reason: ValueReason) -> None:
    assert reasons(record().compare(claim)) == {field: reason}


def test_free_wifi_is_confirmed_by_free() -> None:
    evidence = record(attributes=dict(BUSINESS["attributes"], WiFi="free"))
    assert reasons(evidence.compare("Guests can enjoy free WiFi.")) == {
        "attributes.WiFi": CONFIRMED
    }


def test_several_values_of_one_claim_give_several_findings() -> None:
    parking = record().compare("Customers can park their cars on the street or lot.")
    assert reasons(parking) == {
        "attributes.BusinessParking.street": CONFIRMED,
        "attributes.BusinessParking.lot": MISMATCH,
    }
    ambience = record().compare(
        "The ambiance of the restaurant is described as casual, classy, and divey."
    )
    assert reasons(ambience) == {
        "attributes.Ambience.casual": MISMATCH,
        "attributes.Ambience.classy": CONFIRMED,
        "attributes.Ambience.divey": CONFIRMED,
    }


def test_no_parking_is_wrong_only_where_the_business_has_its_own() -> None:
    """BUSINESS has street parking only: "no parking" there is too loose to judge. With a
    lot of its own, "does not offer parking" is a value mismatch on the lot."""
    assert record().compare("The restaurant does not offer parking services.") == []
    parking = dict(BUSINESS["attributes"]["BusinessParking"], lot=True)
    with_lot = record(attributes={**BUSINESS["attributes"], "BusinessParking": parking})
    findings = with_lot.compare("The restaurant does not offer parking services.")
    assert [(f.reason, f.field, f.claimed) for f in findings] == [
        (MISMATCH, "attributes.BusinessParking.lot", "no")
    ]


def test_a_list_after_one_negation_stays_negated_until_the_next_verb() -> None:
    findings = record().compare(
        "It does not accept reservations, offers outdoor seating, and does not have valet parking."
    )
    assert reasons(findings) == {
        "attributes.RestaurantsReservations": CONFIRMED,
        "attributes.OutdoorSeating": CONFIRMED,
        "attributes.BusinessParking.valet": CONFIRMED,
    }


def test_concept_without_any_field_is_not_in_record() -> None:
    findings = record().compare("The restaurant also offers delivery.")
    assert len(findings) == 1
    assert (findings[0].reason, findings[0].field, findings[0].recorded) == (
        MISSING,
        "delivery",
        None,
    )
    assert findings[0].reason_text.startswith("FIELD_NOT_IN_RECORD: delivery claimed yes")


def test_null_field_is_not_in_record_but_a_review_mentioning_it_grounds_it() -> None:
    attributes = dict(BUSINESS["attributes"], RestaurantsReservations=None)
    assert reasons(record(attributes=attributes).compare("They take reservations.")) == {
        "reservations": MISSING
    }
    reviews = [{"review_stars": 4.0, "review_text": "We had a reservation for six."}]
    grounded = record(attributes=attributes, review_info=reviews)
    assert grounded.compare("They take reservations.") == []


def test_hedged_or_meta_claims_give_nothing() -> None:
    evidence = record()
    assert evidence.compare("Reservations are recommended on weekends.") == []
    assert evidence.compare("Information about delivery is not available.") == []
    assert evidence.compare("One reviewer mentioned the valet was friendly.") == []


# ---------------------------------------------------------------- ratings and counts


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        ("It has a rating of 4.0 out of 5.0 stars.", CONFIRMED),
        ("It is rated 4 out of 5 stars.", CONFIRMED),
        ("It has a 4.5-star rating.", MISMATCH),
        ("It is rated with three and a half stars.", MISMATCH),
        ("Rating: 4.0/5", CONFIRMED),
    ],
)
def test_business_rating(claim: str, reason: ValueReason) -> None:
    assert reasons(record().compare(claim)) == {"business_stars": reason}


def test_review_stars_need_some_review_with_that_many() -> None:
    evidence = record()
    found = evidence.compare("One customer gave the restaurant 5 stars.")
    assert [(f.reason, f.field) for f in found] == [(CONFIRMED, "review_info[0].review_stars")]
    missing = evidence.compare("Another customer gave it 1 star.")
    assert [(f.reason, f.recorded) for f in missing] == [(MISMATCH, "5.0, 3.0")]
    assert evidence.compare("Reviews give it an average of 4.5 stars.") == []


def test_counts_against_count_fields_and_list_lengths() -> None:
    assert reasons(record().compare("The rating is based on two reviews.")) == {
        "review_info": CONFIRMED
    }
    counted = record(review_count=120)
    assert reasons(counted.compare("The restaurant has 150 reviews.")) == {"review_count": MISMATCH}


# ------------------------------------------------------------------- generic records


def test_generic_fields_record_prices_and_units() -> None:
    item = EvidenceItem(
        id="R1",
        text="Product lookup",
        kind=EvidenceKind.TOOL_RESULT,
        fields={"product": {"name": "Trail bike", "price": "EUR 1,299.00", "weight_kg": 11.2}},
    )
    evidence = StructuredEvidence.from_items([item])
    assert reasons(evidence.compare("The trail bike costs EUR 1,299.")) == {
        "product.price": CONFIRMED
    }
    assert reasons(evidence.compare("The bike is priced at $1,299.")) == {"product.price": MISMATCH}
    assert reasons(evidence.compare("Its weight is 11200 g.")) == {"product.weight_kg": CONFIRMED}
    assert reasons(evidence.compare("Its weight is 12 kg.")) == {"product.weight_kg": MISMATCH}
    assert evidence.compare("It weighs about 12 kg.") == []


def test_order_records_give_no_attribute_findings() -> None:
    item = EvidenceItem(
        id="R1",
        text="Order",
        kind=EvidenceKind.RECORD,
        fields={"order": {"status": "shipped", "total": "EUR 118.84"}},
    )
    evidence = StructuredEvidence.from_items([item])
    assert evidence.compare("We also offer free delivery on all orders.") == []
    assert evidence.compare("Your order total is EUR 118.48.") == []  # records.py's job


def test_city_state_and_street_number() -> None:
    evidence = record()
    assert reasons(evidence.compare("It is located in Summerland, California.")) == {
        "city": CONFIRMED,
        "state": CONFIRMED,
    }
    assert reasons(evidence.compare("It is located in Montecito, CA.")) == {
        "city": MISMATCH,
        "state": CONFIRMED,
    }
    assert reasons(evidence.compare("It is located at 2257 Ortega Hill Rd.")) == {
        "address": MISMATCH
    }
    assert evidence.compare("It sits in the heart of Summerland.") == []


# ------------------------------------------------------------------------ no record


def test_prose_evidence_has_no_record_and_no_findings() -> None:
    evidence = StructuredEvidence.from_items(
        [EvidenceItem(id="P1", text="The cafe opens at 9 am and offers delivery.")]
    )
    assert evidence.empty
    assert evidence.compare("The cafe is open from 9 am to 5 pm and offers delivery.") == []


def test_no_evidence_at_all() -> None:
    evidence = StructuredEvidence.from_items([])
    assert evidence.empty
    assert evidence.compare("It has a 4.5-star rating.") == []
    assert not record().empty
