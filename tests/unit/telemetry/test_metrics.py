"""The worker's Prometheus metrics: counts from a real judged batch, bounded label keys,
and lag and window gauges that leave with what they describe. The judge's accuracy is in
test_metrics_accuracy.py, the contract as a scraper sees it in test_metrics_http.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from aiokafka.structs import TopicPartition

from streamproc.contracts.events import Action, DeadLetterReason, UnverifiedReason, VerdictLabel
from streamproc.contracts.label_events import SampledBecause
from streamproc.kafka.progress import ProgressWatch, partition_lags
from streamproc.telemetry.metrics import OTHER, WorkerMetrics, window_label
from streamproc.telemetry.sensors import PublishedBatch
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.stage import StageOutput
from tests.unit.telemetry.metrics_samples import (
    ABSTAINED,
    BAD,
    FRENCH,
    GOOD,
    OCCURRED,
    OTHER_TENANT,
    answer,
    judged,
    key,
    value,
)

# ------------------------------------------------------------------ one judged batch


def test_a_judged_batch_is_counted_by_key_action_verdict_and_reason() -> None:
    output = judged(GOOD, b"{oops", BAD, ABSTAINED, GOOD, OTHER_TENANT)
    bad = next(v for v in output.verdicts if v.event_id == "bad")
    assert bad.judgement.hallucinated and bad.judgement.action is not Action.PASS
    metrics = WorkerMetrics()
    metrics.observe_batch(output)

    t = key()
    assert value(metrics, "streamproc_answers_total", **t, action="pass") == 2  # good, abstained
    assert value(metrics, "streamproc_answers_total", **t, action=bad.judgement.action.value) == 1
    assert value(metrics, "streamproc_answers_answered_total", **t) == 2  # not the abstention
    assert value(metrics, "streamproc_answers_hallucinated_total", **t) == 1
    u = key("u", "llm2")
    assert value(metrics, "streamproc_answers_answered_total", **u) == 1
    assert value(metrics, "streamproc_answers_hallucinated_total", **u) == 1
    assert value(metrics, "streamproc_answers_total", **u, action="pass") is None

    # "Hello!" is a conversational claim: checked by nobody, counted as unchecked.
    assert value(metrics, "streamproc_claims_total", verdict="unchecked") == 1
    assert value(metrics, "streamproc_claims_total", verdict="supported") == 1
    expected_wrong = sum(
        1
        for v in output.verdicts
        for c in v.judgement.claims
        if c.verdict in (VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED)
    )
    wrong = sum(
        value(metrics, "streamproc_claims_total", verdict=label) or 0
        for label in ("contradicted", "unsupported")
    )
    assert wrong == expected_wrong >= 2  # bad and the other tenant's copy of it
    flag_action = bad.judgement.action.value
    assert value(metrics, "streamproc_flags_total", action=flag_action) == len(output.flags) == 2
    assert value(metrics, "streamproc_dead_letters_total", reason="bad_json") == 1


def test_an_unverified_answer_is_counted_apart_by_reason_not_in_the_objective() -> None:
    output = judged(GOOD, FRENCH, BAD)
    french = next(v for v in output.verdicts if v.event_id == "fr")
    assert french.judgement.unverified_reason is UnverifiedReason.LANGUAGE_NOT_SUPPORTED
    metrics = WorkerMetrics()
    metrics.observe_batch(output)

    t = key()
    assert value(metrics, "streamproc_answers_total", **t, action="pass") == 2  # good, French
    assert value(metrics, "streamproc_answers_answered_total", **t) == 2  # good, bad
    assert value(metrics, "streamproc_answers_hallucinated_total", **t) == 1  # bad
    unverified = {
        reason.value: value(metrics, "streamproc_answers_unverified_total", **t, reason=reason)
        for reason in UnverifiedReason
    }
    assert unverified == {
        "LANGUAGE_NOT_SUPPORTED": 1,
        "BUDGET_EXCEEDED": 0,  # every reason's series starts at zero with the key
        "OVERLOADED": 0,
        "JUDGE_ERROR": 0,
        "OUTBOX_FULL": 0,
    }
    claims = len(french.judgement.claims)
    assert value(metrics, "streamproc_claims_total", verdict="unverified") == claims >= 1


def test_latencies_are_per_answer_and_the_batch_size_per_batch() -> None:
    output = judged(GOOD, b"{oops", BAD, GOOD)  # 4 messages: 2 answers, a letter, a repeat
    metrics = WorkerMetrics()
    metrics.observe_batch(output)

    judge_s = output.verdicts[0].timings.judge_ms / 1000
    assert value(metrics, "streamproc_judge_latency_seconds_count") == 2
    assert value(metrics, "streamproc_judge_latency_seconds_sum") == pytest.approx(2 * judge_s)
    # occurred_at -> judged_at is 3 s: above the 2.5 s bucket, inside the 5 s one.
    assert value(metrics, "streamproc_end_to_end_latency_seconds_bucket", le="2.5") == 0
    assert value(metrics, "streamproc_end_to_end_latency_seconds_bucket", le="5.0") == 2
    assert value(metrics, "streamproc_end_to_end_latency_seconds_sum") == pytest.approx(6.0)
    assert value(metrics, "streamproc_batch_size_count") == 1
    assert value(metrics, "streamproc_batch_size_sum") == 4

    later = WorkerMetrics()
    later.observe_batch(output, published_at=OCCURRED + timedelta(seconds=40))
    assert value(later, "streamproc_end_to_end_latency_seconds_sum") == pytest.approx(80.0)
    skewed = WorkerMetrics()
    skewed.observe_batch(output, published_at=OCCURRED - timedelta(seconds=5))
    assert value(skewed, "streamproc_end_to_end_latency_seconds_bucket", le="0.01") == 2


def test_review_items_are_counted_by_why_they_were_sampled_from_zero() -> None:
    metrics = WorkerMetrics()
    because = "streamproc_review_items_total"
    assert {b: value(metrics, because, because=b) for b in ("flagged", "random")} == {
        "flagged": 0,
        "random": 0,
    }
    metrics.observe_batch(judged(GOOD, BAD))  # no sampling configured: no items
    assert value(metrics, because, because="flagged") == 0

    # Every passed answer drawn (rate 1): the two good ones; BAD flagged; the abstention
    # is not sampled.
    twin = answer("good2", "Hello! The order was shipped on Monday [D1].")
    output = judged(GOOD, twin, BAD, ABSTAINED, review=ReviewSampling(1.0))
    batch: PublishedBatch = output  # the stage's output is what the sensors protocol reads
    reasons = sorted(item.sampled_because for item in batch.review_items)
    assert reasons == [SampledBecause.FLAGGED, SampledBecause.RANDOM, SampledBecause.RANDOM]
    metrics.observe_batch(batch)
    assert value(metrics, because, because="flagged") == 1
    assert value(metrics, because, because="random") == 2


def test_an_empty_batch_and_outside_dead_letters() -> None:
    metrics = WorkerMetrics()
    metrics.observe_batch(StageOutput())
    assert value(metrics, "streamproc_batch_size_count") == 0
    metrics.dead_letter(DeadLetterReason.UNREADABLE_RECORD, "schema_violation")
    assert value(metrics, "streamproc_dead_letters_total", reason="unreadable_record") == 1
    assert value(metrics, "streamproc_dead_letters_total", reason="schema_violation") == 1


def test_two_workers_never_share_numbers() -> None:
    first, second = WorkerMetrics(), WorkerMetrics()
    first.late_event("t", "bot", "llm")
    assert value(first, "streamproc_late_events_total", **key()) == 1
    assert value(second, "streamproc_late_events_total", **key()) is None


# ------------------------------------------------------------------ cardinality


def test_keys_past_the_budget_share_one_other_series_and_sums_stay_exact() -> None:
    metrics = WorkerMetrics(max_keys=1)
    metrics.observe_batch(judged(BAD, OTHER_TENANT))  # t/llm admitted first, u/llm2 is not
    metrics.late_event("v", "bot", "llm3")

    assert value(metrics, "streamproc_answers_answered_total", **key()) == 1
    assert value(metrics, "streamproc_answers_answered_total", **key("u", "llm2")) is None
    other = {"tenant": OTHER, "assistant": OTHER, "model": OTHER}
    assert value(metrics, "streamproc_answers_answered_total", **other) == 1
    assert value(metrics, "streamproc_answers_hallucinated_total", **other) == 1
    assert value(metrics, "streamproc_late_events_total", **other) == 1

    # A rate mixed over unrelated keys means nothing: over-budget window gauges are left out.
    metrics.window_rate("u", "bot", "llm2", "1m", 0.5, 0.1, 0.9)
    assert 'tenant="u"' not in metrics.render().decode()
    assert (
        value(metrics, "streamproc_window_hallucination_rate", **key("u", "llm2"), window="1m")
        is None
    )
    metrics.window_rate("t", "bot", "llm", "1m", 0.5, 0.1, 0.9)  # the admitted key still may
    assert value(metrics, "streamproc_window_hallucination_rate", **key(), window="1m") == 0.5


def test_alert_pairs_have_their_own_budget() -> None:
    metrics = WorkerMetrics(max_keys=1)
    metrics.alert_state("t", "bot", "page", True)
    metrics.alert_state("u", "bot", "page", True)
    metrics.alert_state("t", "bot", "ticket", False)
    firing = "streamproc_alert_firing"
    assert value(metrics, firing, tenant="t", assistant="bot", severity="page") == 1
    assert value(metrics, firing, tenant="t", assistant="bot", severity="ticket") == 0
    assert value(metrics, firing, tenant="u", assistant="bot", severity="page") is None
    metrics.alert_state("t", "bot", "page", False)
    assert value(metrics, firing, tenant="t", assistant="bot", severity="page") == 0


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_keys"):
        WorkerMetrics(max_keys=-1)


# ------------------------------------------------------------------ windows


def test_window_gauges_are_set_removed_on_no_data_and_expire_when_not_updated() -> None:
    now = [1000.0]
    metrics = WorkerMetrics(window_stale_after_s=60.0, clock=lambda: now[0])
    rate = "streamproc_window_hallucination_rate"
    metrics.window_rate("t", "bot", "llm", "1m", 0.25, 0.1, 0.45)
    metrics.window_rate("t", "bot", "llm", "1h", 0.02, 0.01, 0.04, corrected=0.015)
    assert value(metrics, rate, **key(), window="1m") == 0.25
    assert value(metrics, f"{rate}_wilson_low", **key(), window="1m") == 0.1
    assert value(metrics, f"{rate}_wilson_high", **key(), window="1m") == 0.45
    corrected = "streamproc_window_corrected_hallucination_rate"
    assert value(metrics, corrected, **key(), window="1h") == 0.015
    assert value(metrics, corrected, **key(), window="1m") is None  # none: no series

    metrics.window_rate("t", "bot", "llm", "1m", None, None, None)  # nothing answered
    assert value(metrics, rate, **key(), window="1m") is None
    assert value(metrics, f"{rate}_wilson_low", **key(), window="1m") is None

    now[0] += 59.0
    metrics.refresh()
    assert value(metrics, rate, **key(), window="1h") == 0.02
    now[0] += 2.0  # 61 s since its last update: the key went quiet
    metrics.refresh()
    assert value(metrics, corrected, **key(), window="1h") is None
    assert value(metrics, rate, **key(), window="1h") is None
    assert value(metrics, f"{rate}_wilson_high", **key(), window="1h") is None


def test_window_labels() -> None:
    assert [window_label(s) for s in (60, 300, 3600, 86400, 90, 5400, 259200)] == [
        "1m",
        "5m",
        "1h",
        "1d",
        "90s",
        "90m",
        "3d",
    ]
    for bad in (0, -60, 1.5):
        with pytest.raises(ValueError):
            window_label(bad)


# ------------------------------------------------------------------ lag


def test_lag_gauges_follow_the_owned_partitions() -> None:
    metrics = WorkerMetrics()
    lag = "streamproc_consumer_lag"
    metrics.set_lag("judge", {0: 5, 1: 0, 2: None})
    metrics.set_lag("windows", {0: 7})
    assert value(metrics, lag, loop="judge", partition="0") == 5
    assert value(metrics, lag, loop="judge", partition="1") == 0
    assert value(metrics, lag, loop="judge", partition="2") is None  # end not known yet

    metrics.set_lag("judge", {1: 3})  # partition 0 revoked
    assert value(metrics, lag, loop="judge", partition="0") is None
    assert value(metrics, lag, loop="judge", partition="1") == 3
    assert value(metrics, lag, loop="windows", partition="0") == 7  # the other loop's own


def test_lag_is_read_from_a_progress_watch_at_every_scrape() -> None:
    watch: ProgressWatch[TopicPartition] = ProgressWatch(stall_after_s=30.0)
    a, b, c = (TopicPartition("answers", p) for p in (0, 1, 2))
    watch.assigned([a, b], now=0.0)
    watch.committed({a: 10, b: 0}, now=0.0)
    watch.ends({a: 25, b: 4}, now=0.0)
    metrics = WorkerMetrics()
    metrics.add_lag_source("judge", lambda: partition_lags(watch))
    lag = "streamproc_consumer_lag"

    metrics.refresh()
    assert value(metrics, lag, loop="judge", partition="0") == 15
    assert value(metrics, lag, loop="judge", partition="1") == 4

    watch.acknowledged({a: 20}, now=1.0)
    watch.revoked()
    watch.assigned([a, c], now=2.0)  # a rebalance took partition 1 away
    watch.committed({a: 20, c: 3}, now=2.0)
    watch.ends({a: 25, c: 3}, now=2.0)
    text = metrics.render().decode()
    assert value(metrics, lag, loop="judge", partition="0") == 5
    assert value(metrics, lag, loop="judge", partition="1") is None
    assert value(metrics, lag, loop="judge", partition="2") == 0
    assert 'partition="1"' not in text
