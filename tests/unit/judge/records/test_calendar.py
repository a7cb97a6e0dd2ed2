"""Dates and times read with dateparser: what a claim writes, against the answer's time."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from streamproc.judge.records.calendar import DateReader

NOW = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)  # a Thursday
READER = DateReader("en_US")


def one(text: str):  # type: ignore[no-untyped-def]
    found = READER.mentions(text, NOW)
    assert len(found) == 1, found
    return found[0]


def test_a_date_in_any_common_form() -> None:
    for text in (
        "It was issued on 10 February 2026.",
        "It was issued on Feb 10th, 2026.",
        "It was issued on 2026-02-10.",
        "It was issued on Tuesday, 10 February 2026.",
    ):
        assert one(text).date_matches(date(2026, 2, 10)), text
        assert not one(text).date_matches(date(2026, 2, 11)), text


def test_a_mention_keeps_only_what_it_writes() -> None:
    no_year = one("It arrives on 12 March.")
    assert no_year.date_matches(date(2027, 3, 12)) and not no_year.date_matches(date(2026, 3, 13))
    weekday = one("It arrives on Friday.")
    assert weekday.date_matches(date(2026, 3, 13)) and not weekday.date_matches(date(2026, 3, 12))


def test_relative_days_are_read_against_the_answer_time() -> None:
    assert one("It was delivered yesterday.").date_matches(date(2026, 3, 4))
    assert one("It arrives tomorrow.").date_matches(date(2026, 3, 6))
    morning = one("The payment arrived this morning.")
    assert morning.date_matches(date(2026, 3, 5)) and morning.time_matches(time(9, 30))


def test_times_in_twelve_and_twenty_four_hours() -> None:
    assert one("It leaves at 7:45 am.").clocks == ((7, 45),)
    assert one("It leaves at 7:45 pm.").clocks == ((19, 45),)
    assert set(one("It leaves at 7:45.").clocks) == {(7, 45), (19, 45)}
    assert one("It leaves at 07:45.").clocks == ((7, 45),)


def test_a_numeric_date_both_orders_can_read_matches_either() -> None:
    mention = one("It renews on 03/04/2026.")
    assert mention.date_matches(date(2026, 3, 4)) and mention.date_matches(date(2026, 4, 3))
    assert one("It renews on 25/04/2026.").date_matches(date(2026, 4, 25))


def test_what_is_no_date() -> None:
    assert READER.mentions("Order 4500017311 was for 250 pieces.", NOW) == []
    assert READER.mentions("Your refund may take a while.", NOW) == []
    assert READER.mentions("The technician will come between 8 and 12.", NOW) == []


def test_record_values() -> None:
    assert READER.recorded("2026-03-12T07:45:00") is not None
    recorded = READER.recorded("2026-03-12T07:45:00")
    assert recorded is not None and recorded.day == date(2026, 3, 12)
    assert recorded.clock == (time(7, 45),)
    day_only = READER.recorded("2026-02-10")
    assert day_only is not None and day_only.clock == ()
    window = READER.recorded("09:30-10:00")
    assert window is not None and window.day is None and len(window.clock) == 2
    for not_a_date in ("4500017311", "731 De La Guerra Plz", "soon", 42, None):
        assert READER.recorded(not_a_date) is None
