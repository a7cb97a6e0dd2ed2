"""Rolling counts and burn-rate conditions, against brute-force sums and hand-made cases."""

from __future__ import annotations

import random

import pytest

from streamproc.monitor.alerts.burn_rate import (
    BUCKET_S,
    BurnCondition,
    RollingCounts,
    WindowCount,
    alert_windows,
    burn_condition,
    evaluate_burn,
)
from streamproc.monitor.options import AlertSettings, BurnRateWindow

T0 = 1_800_000_000  # a whole day in epoch seconds (divisible by 6 h)
HOUR = 3600


def _brute(minutes: dict[int, tuple[int, int]], start: float, end: float) -> tuple[int, int]:
    """Sum of minute buckets whose start lies in [start, end)."""
    answered = hallucinated = 0
    for minute, (a, h) in minutes.items():
        if start <= minute * BUCKET_S < end:
            answered += a
            hallucinated += h
    return answered, hallucinated


def test_default_policy_windows_get_the_documented_resolutions_and_bounded_memory() -> None:
    counts = RollingCounts.for_alerts(AlertSettings())
    assert counts.windows_s == (300, 1800, 3600, 6 * HOUR, 72 * HOUR)
    assert counts._resolution_of == {
        300: 60,
        1800: 60,
        3600: 60,
        6 * HOUR: 300,
        72 * HOUR: 3600,
    }
    kept = sum(level.size for level in counts._levels.values())
    assert kept < 250  # instead of 4,320 one-minute buckets for 3 days


def test_windows_equal_brute_force_sums_over_their_documented_span() -> None:
    rng = random.Random(7)
    windows = (300, 3600, 6 * HOUR, 72 * HOUR)
    counts = RollingCounts(windows)
    minutes: dict[int, tuple[int, int]] = {}
    first = T0 // BUCKET_S
    for minute in range(first, first + 80 * 60):  # 80 hours, with quiet stretches
        if rng.random() < 0.3:
            continue
        answered = rng.randint(0, 40)
        hallucinated = rng.randint(0, answered)
        minutes[minute] = (answered, hallucinated)
        assert counts.add(minute * BUCKET_S + rng.random() * 59, answered, hallucinated)
        as_of = (minute + 1) * BUCKET_S
        if rng.random() < 0.05 or minute == first + 80 * 60 - 1:
            for window in windows:
                resolution = counts._resolution_of[window]
                end_bucket = (as_of - BUCKET_S) // resolution
                start = (end_bucket - window // resolution + 1) * resolution
                span = as_of - start
                assert window - resolution + BUCKET_S <= span <= window
                expected = _brute(minutes, start, as_of)
                got = counts.window(window, as_of=as_of)
                assert (got.answered, got.hallucinated) == expected, (window, as_of)
                if resolution == BUCKET_S:
                    assert expected == _brute(minutes, as_of - window, as_of)  # exact


def test_late_minutes_are_counted_and_too_old_ones_reported() -> None:
    counts = RollingCounts((300, 3600))
    counts.add(T0, 10, 1)
    counts.add(T0 + 50 * 60, 10, 1)
    counts.add(T0 + 20 * 60, 5, 5)  # late: a revised bucket's delta
    assert counts.window(3600, as_of=T0 + 51 * 60) == WindowCount(3600, 25, 7)
    assert counts.window(300, as_of=T0 + 51 * 60) == WindowCount(300, 10, 1)
    counts.add(T0 + 5 * HOUR, 1, 0)
    assert counts.add(T0, 100, 100) is False  # older than any window kept
    assert counts.window(3600, as_of=T0 + 5 * HOUR + 60) == WindowCount(3600, 1, 0)


def test_a_key_quiet_for_longer_than_its_windows_reads_zero() -> None:
    counts = RollingCounts((300, 3600))
    counts.add(T0, 10, 9)
    assert counts.window(300, as_of=T0 + 60).hallucinated == 9
    assert counts.window(3600, as_of=T0 + 2 * HOUR) == WindowCount(3600, 0, 0)
    counts.add(T0 + 10 * HOUR, 4, 1)  # ring wrapped many times over
    assert counts.window(3600, as_of=T0 + 10 * HOUR + 60) == WindowCount(3600, 4, 1)
    assert counts.newest_s == T0 + 10 * HOUR + 60


def test_an_evaluation_too_far_behind_the_newest_counts_is_refused() -> None:
    counts = RollingCounts((3600,))
    counts.add(T0, 1, 0)
    counts.add(T0 + 3 * HOUR, 1, 0)
    assert counts.window(3600, as_of=T0 + 3 * HOUR - 300).answered == 0  # within the lead
    with pytest.raises(ValueError, match="too far behind"):
        counts.window(3600, as_of=T0 + HOUR)


def test_windows_must_be_whole_minutes_and_not_longer_than_the_longest_kept() -> None:
    with pytest.raises(ValueError, match="whole minutes"):
        RollingCounts((90,))
    with pytest.raises(ValueError, match="longer than the longest"):
        RollingCounts((300,)).window(600, as_of=T0)


@pytest.mark.parametrize("length", [120, 2 * HOUR, 10 * HOUR + 60, 50 * HOUR])
def test_other_window_lengths_are_read_at_the_finest_resolution_holding_them(
    length: int,
) -> None:
    counts = RollingCounts.for_alerts(AlertSettings())
    minutes: dict[int, tuple[int, int]] = {}
    first = T0 // BUCKET_S
    end = first + 60 * 60 - 17  # mid-hour and mid-5-minutes
    for minute in range(first, end, 3):
        minutes[minute] = (10, minute % 4)
        counts.add(minute * BUCKET_S, 10, minute % 4)
    as_of = end * BUCKET_S
    level, buckets = counts._plan(length)
    end_bucket = (as_of - BUCKET_S) // level.resolution
    start = (end_bucket - buckets + 1) * level.resolution
    assert length - 2 * level.resolution < as_of - start <= length
    got = counts.window(length, as_of=as_of)
    assert (got.answered, got.hallucinated) == _brute(minutes, start, as_of)


def test_rolling_counts_json_round_trip_keeps_every_window() -> None:
    rng = random.Random(3)
    counts = RollingCounts.for_alerts(AlertSettings())
    for minute in range(0, 4000, 7):
        counts.add(T0 + minute * 60, rng.randint(1, 20), rng.randint(0, 1))
    restored = RollingCounts.from_json(counts.to_json())
    as_of = T0 + 4000 * 60
    for window in counts.windows_s:
        assert restored.window(window, as_of=as_of) == counts.window(window, as_of=as_of)
    assert restored.newest_s == counts.newest_s
    # restored counts keep rolling like the original
    for c in (counts, restored):
        c.add(as_of, 7, 7)
    for window in counts.windows_s:
        later = as_of + 60
        assert restored.window(window, as_of=later) == counts.window(window, as_of=later)


PAGE = BurnRateWindow(long_s=3600, short_s=300, factor=14.4)


def _page(
    long: tuple[int, int], short: tuple[int, int], *, min_answered: int = 30
) -> BurnCondition:
    """The default fast page (14.4x over 1 h and 5 min) on (answered, hallucinated) counts."""
    return burn_condition(
        "page",
        PAGE,
        WindowCount(3600, *long),
        WindowCount(300, *short),
        objective=0.05,
        min_answered=min_answered,
        require_wilson=True,
    )


def test_condition_met_only_when_both_windows_burn_with_enough_answers() -> None:
    met = _page((200, 160), (20, 18))
    assert met.met and met.long_burn_rate == pytest.approx(16.0)
    assert met.short_burn_rate == pytest.approx(18.0)
    assert met.long_wilson_low is not None and met.long_wilson_low > 0.7
    assert _page((200, 160), (20, 2)).unmet == ("short_burn",)
    assert _page((200, 20), (20, 18)).unmet == ("long_burn",)
    empty_short = _page((200, 160), (0, 0))
    assert empty_short.unmet == ("short_burn",) and empty_short.short_rate is None


def test_three_of_four_in_a_quiet_hour_is_stopped_by_the_minimum_sample() -> None:
    few = _page((4, 3), (4, 3))
    assert few.unmet == ("min_answered",)
    # the guard is what stops it: the burn is 15x and the Wilson low 0.30 > 0.05
    assert few.long_wilson_low == pytest.approx(0.3006, abs=1e-4)
    assert _page((4, 3), (4, 3), min_answered=1).met


def test_wilson_guard_stops_a_ticket_on_a_marginal_sample() -> None:
    ticket = BurnRateWindow(long_s=3 * 24 * HOUR, short_s=6 * HOUR, factor=1.0)
    long, short = WindowCount(259200, 30, 2), WindowCount(21600, 30, 2)  # 6.7 % > 5 %
    guarded = burn_condition(
        "ticket", ticket, long, short, objective=0.05, min_answered=30, require_wilson=True
    )
    assert guarded.unmet == ("wilson",)
    assert guarded.long_wilson_low is not None and guarded.long_wilson_low < 0.05
    unguarded = burn_condition(
        "ticket", ticket, long, short, objective=0.05, min_answered=30, require_wilson=False
    )
    assert unguarded.met


def test_evaluate_burn_reads_every_pair_and_ranks_page_over_ticket() -> None:
    alerts = AlertSettings()
    assert alert_windows(alerts) == (300, 1800, 3600, 21600, 259200)
    counts = RollingCounts.for_alerts(alerts)
    start = T0
    for minute in range(6 * 60):  # 6 h at 80 % hallucinated: every pair burns
        counts.add(start + minute * 60, 50, 40)
    decision = evaluate_burn(counts, alerts, as_of=start + 6 * HOUR)
    assert [c.severity for c in decision.conditions] == ["page", "page", "ticket"]
    assert all(c.met for c in decision.conditions)
    assert decision.severity == "page"
    assert decision.triggering("page") is decision.conditions[0]
    assert decision.conditions[0].long_answered == 3000
    assert decision.conditions[2].long_answered == 6 * 60 * 50
    quiet = evaluate_burn(counts, alerts, as_of=start + 30 * 24 * HOUR)
    assert quiet.severity is None
    assert quiet.reading("page", 3600, 300) is quiet.conditions[0]
