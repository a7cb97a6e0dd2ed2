"""The arithmetic of the stream benchmark: when an open-loop producer sends, how
percentiles, rates and lag are taken, and what a phase's summary says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.stream_bench import (
    LagSample,
    as_json,
    consumer_lag,
    pacing_schedule,
    percentile,
    summarise_latencies,
    summarise_phase,
    sustained_rate,
)

# ------------------------------------------------------------------------- pacing


def test_the_schedule_sends_at_fixed_intervals_for_the_duration() -> None:
    assert pacing_schedule(2.0, 3.0) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert pacing_schedule(4.0, 1.0) == [0.0, 0.25, 0.5, 0.75]


def test_the_schedule_offers_rate_times_duration_answers() -> None:
    for rate, duration in [(2.2, 60.0), (0.9 * 4.4, 60.0), (137.5, 12.0), (3.0, 0.5)]:
        schedule = pacing_schedule(rate, duration)
        assert len(schedule) == math.ceil(rate * duration - 1e-9)
        assert all(0 <= t < duration for t in schedule)
        gaps = np.diff(schedule)
        assert np.allclose(gaps, 1 / rate)


def test_floating_point_noise_adds_no_send() -> None:
    assert 0.07 * 100 > 7  # 7.000000000000001
    assert len(pacing_schedule(0.07, 100.0)) == 7
    assert 0.57 * 100 < 57  # 56.99999999999999
    assert len(pacing_schedule(0.57, 100.0)) == 57


def test_a_rate_slower_than_the_duration_still_sends_the_first_answer_at_once() -> None:
    assert pacing_schedule(0.5, 1.0) == [0.0]
    assert pacing_schedule(0.1, 5.0) == [0.0]


@pytest.mark.parametrize(("rate", "duration"), [(0, 10), (-1, 10), (1, 0), (float("inf"), 1)])
def test_the_schedule_refuses_nonsense(rate: float, duration: float) -> None:
    with pytest.raises(ValueError):
        pacing_schedule(rate, duration)


# -------------------------------------------------------------------- percentiles


def test_percentiles_match_numpy() -> None:
    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 10, 101, 1000):
        values = list(rng.exponential(0.3, size))
        for q in (0, 1, 50, 95, 99, 99.9, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([10.0, 20.0], 95) == pytest.approx(19.5)
    assert percentile([5.0], 99) == 5.0


def test_percentile_of_nothing_or_out_of_range_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_latencies_are_summarised_in_milliseconds() -> None:
    summary = summarise_latencies([0.1] * 98 + [1.0, 2.0])
    assert summary is not None
    assert summary.count == 100
    assert summary.p50_ms == pytest.approx(100.0)
    assert summary.p95_ms == pytest.approx(100.0)
    assert summary.p99_ms == pytest.approx(1010.0)  # between the 99th (1 s) and 100th (2 s)
    assert summary.max_ms == pytest.approx(2000.0)
    assert summary.mean_ms == pytest.approx(128.0)
    assert summarise_latencies([]) is None


# --------------------------------------------------------------------------- rates


def test_the_sustained_rate_counts_from_the_first_verdict() -> None:
    # A first fetch of 4 verdicts at t=10 fills the pipeline; 6 more come over 3 s.
    seen = [10.0] * 4 + [11.0, 11.0, 12.0, 12.0, 13.0, 13.0]
    assert sustained_rate(seen) == pytest.approx(2.0)


def test_no_sustained_rate_without_an_interval() -> None:
    assert sustained_rate([]) is None
    assert sustained_rate([5.0]) is None
    assert sustained_rate([5.0, 5.0, 5.0]) is None


# ----------------------------------------------------------------------------- lag


def test_lag_is_end_minus_committed_over_partitions() -> None:
    ends = {0: 100, 1: 50, 2: 7}
    assert consumer_lag(ends, {0: 90, 1: 50, 2: 0}) == 10 + 0 + 7


def test_a_partition_never_committed_counts_from_its_start() -> None:
    ends = {0: 100, 1: 50, 2: 30}
    assert consumer_lag(ends, {0: 100, 1: -1}) == 50 + 30
    assert consumer_lag(ends, {0: 100, 1: -1}, start_offsets={1: 40, 2: 25}) == 10 + 5


def test_a_commit_ahead_of_a_stale_end_offset_is_no_negative_lag() -> None:
    assert consumer_lag({0: 10, 1: 10}, {0: 12, 1: 4}) == 6


# ------------------------------------------------------------------------- phases


def test_a_phase_summary_counts_only_the_answers_it_sent() -> None:
    sent = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.5, "e": 2.0}
    seen = {"a": 0.2, "b": 0.9, "c": 1.4, "warm-up": -3.0}
    lag = [LagSample(0.0, 1), LagSample(1.0, 4), LagSample(2.0, 2), LagSample(3.0, 0)]
    result = summarise_phase(
        "open-loop",
        2,
        sent,
        seen,
        dead=["d", "warm-up-2"],
        lag=lag,
        load=0.5,
        offered_rate=2.0,
        slips_s=[0.0, 0.002, 0.001],
        wall_s=4.0,
    )
    assert (result.sent, result.decided, result.dead_letters, result.missing) == (5, 3, 1, 1)
    assert result.send_rate == pytest.approx(2.0)  # 4 intervals over 2 s
    assert result.sustained_rate == pytest.approx(2 / 1.2)  # b and c after a, over 1.2 s
    assert result.achieved_rate == pytest.approx(3 / 1.4)  # from the first send
    assert result.latency is not None
    assert result.latency.count == 3
    assert result.latency.p50_ms == pytest.approx(400.0)
    assert result.latency.max_ms == pytest.approx(400.0)
    assert result.latency.mean_ms == pytest.approx((200 + 400 + 400) / 3)
    assert (result.max_lag, result.final_lag) == (4, 0)
    assert result.send_slip_max_ms == pytest.approx(2.0)


def test_a_phase_with_no_verdict_says_so_without_inventing_numbers() -> None:
    result = summarise_phase("saturation", 1, {"a": 0.0, "b": 0.0}, {})
    assert (result.decided, result.missing) == (0, 2)
    assert result.latency is None
    assert result.sustained_rate is None and result.achieved_rate is None
    assert result.send_rate is None  # both sent at once
    assert result.max_lag is None and result.final_lag is None


def test_a_phase_as_json_keeps_every_number_and_the_lag_series() -> None:
    lag = [LagSample(0.0, 3), LagSample(1.0, 0)]
    result = summarise_phase("saturation", 1, {"a": 0.0, "b": 0.1}, {"a": 1.0, "b": 2.0}, lag=lag)
    data = as_json(result)
    assert data["lag_samples"] == [[0.0, 3], [1.0, 0]]
    assert data["latency_ms"]["p99"] == pytest.approx(1000 * (1.0 + 0.99 * 0.9))
    assert data["sustained_rate"] == pytest.approx(1.0)
    assert data["decided"] == 2 and data["missing"] == 0 and data["mode"] == "saturation"


def test_the_latency_splits_into_before_during_and_after_judging() -> None:
    sent = {"a": 0.0, "b": 0.1}
    seen = {"a": 0.5, "b": 0.9}
    timings = {"a": (0.2, 2), "b": (0.2, 2)}  # judged together, 200 ms
    judged_at = {"a": 0.4, "b": 0.4, "warm-up": 9.0}  # judging began at 0.2
    result = summarise_phase("open-loop", 1, sent, seen, timings=timings, judged_at=judged_at)
    assert result.before_judge is not None and result.after_judge is not None
    assert sorted([result.before_judge.p50_ms, result.before_judge.max_ms]) == pytest.approx(
        [150.0, 200.0]  # a waited 200 ms, b 100 ms: p50 halfway
    )
    assert result.after_judge.max_ms == pytest.approx(500.0)  # b read 0.5 s after judging
    data = as_json(result)
    assert data["before_judge_ms"]["p99"] == pytest.approx(199.0)
    assert data["after_judge_ms"]["p50"] == pytest.approx(300.0)
    assert as_json(summarise_phase("saturation", 1, sent, seen))["after_judge_ms"] is None
