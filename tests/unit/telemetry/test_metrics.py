"""The worker's Prometheus metrics: counts from a real judged batch, the contract's names
and labels as a scraper sees them over HTTP, bounded label keys, lag and window gauges
that leave with what they describe."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest
from aiokafka.structs import TopicPartition
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from streamproc.contracts.events import Action, DeadLetterReason, UnverifiedReason, VerdictLabel
from streamproc.contracts.label_events import (
    AccuracyCell,
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    SampledBecause,
    Tally,
)
from streamproc.inference.options import JudgeSettings
from streamproc.kafka.progress import ProgressWatch, partition_lags
from streamproc.rates.corrected_rate import ConfusionCounts
from streamproc.rates.live_accuracy import DRIFT_FINDINGS, CellState, accuracy_event
from streamproc.telemetry.metrics import (
    ACCURACY_STALE_FACTOR,
    LABEL_OUTCOMES,
    OTHER,
    WorkerMetrics,
    window_label,
)
from streamproc.telemetry.options import MetricsSettings
from streamproc.telemetry.sensors import AccuracySensor, PublishedBatch
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.stage import (
    IncomingMessage,
    StageLimits,
    StageOutput,
    judge_messages,
)
from streamproc.web.health import HealthState
from streamproc.web.metrics_server import MetricsServer
from streamproc.wiring import build_judge

OCCURRED = datetime(2026, 1, 1, tzinfo=UTC)
JUDGED = OCCURRED + timedelta(seconds=3)
EVIDENCE = "The order was shipped on Monday."

CELL_LABELS = frozenset({"tenant", "assistant", "task_type", "judge"})
# The metrics contract (rules, dashboard): sample name -> (type, label names).
CONTRACT: dict[str, tuple[str, frozenset[str]]] = {
    "streamproc_answers_total": (
        "counter",
        frozenset({"tenant", "assistant", "model", "action"}),
    ),
    "streamproc_answers_answered_total": ("counter", frozenset({"tenant", "assistant", "model"})),
    "streamproc_answers_hallucinated_total": (
        "counter",
        frozenset({"tenant", "assistant", "model"}),
    ),
    "streamproc_answers_unverified_total": (
        "counter",
        frozenset({"tenant", "assistant", "model", "reason"}),
    ),
    "streamproc_claims_total": ("counter", frozenset({"verdict"})),
    "streamproc_flags_total": ("counter", frozenset({"action"})),
    "streamproc_dead_letters_total": ("counter", frozenset({"reason"})),
    "streamproc_duplicate_events_total": ("counter", frozenset()),
    "streamproc_trace_context_dropped_total": ("counter", frozenset({"header", "reason"})),
    "streamproc_judge_latency_seconds": ("histogram", frozenset()),
    "streamproc_end_to_end_latency_seconds": ("histogram", frozenset()),
    "streamproc_batch_size": ("histogram", frozenset()),
    "streamproc_consumer_lag": ("gauge", frozenset({"loop", "partition"})),
    "streamproc_late_events_total": ("counter", frozenset({"tenant", "assistant", "model"})),
    "streamproc_window_hallucination_rate": (
        "gauge",
        frozenset({"tenant", "assistant", "model", "window"}),
    ),
    "streamproc_window_hallucination_rate_wilson_low": (
        "gauge",
        frozenset({"tenant", "assistant", "model", "window"}),
    ),
    "streamproc_window_hallucination_rate_wilson_high": (
        "gauge",
        frozenset({"tenant", "assistant", "model", "window"}),
    ),
    "streamproc_alert_firing": ("gauge", frozenset({"tenant", "assistant", "severity"})),
    **{
        f"streamproc_judge_live_{figure}{bound}": ("gauge", CELL_LABELS)
        for figure in ("sensitivity", "specificity", "precision")
        for bound in ("", "_low", "_high")
    },
    "streamproc_judge_labelled_answers": ("gauge", CELL_LABELS),
    "streamproc_judge_reviewer_kappa": ("gauge", CELL_LABELS),
    "streamproc_judge_claim_agreement": ("gauge", CELL_LABELS),
    "streamproc_judge_drift": ("gauge", CELL_LABELS | {"finding"}),
    "streamproc_labels_total": ("counter", frozenset({"outcome"})),
    "streamproc_review_items_total": ("counter", frozenset({"because"})),
}


def answer(event_id: str, text: str, *, tenant: str = "t", model: str = "llm") -> dict[str, object]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": tenant,
        "assistant_id": "bot",
        "model": model,
        "occurred_at": OCCURRED.isoformat(),
        "question": "What happened to the order?",
        "answer": text,
        "evidence": [{"id": "D1", "text": EVIDENCE}],
    }


GOOD = answer("good", "Hello! The order was shipped on Monday [D1].")
BAD = answer("bad", "The order was shipped on 3 May [D1].")
ABSTAINED = answer("abstained", "I don't know.")
OTHER_TENANT = answer("other", "The order was shipped on 3 May [D1].", tenant="u", model="llm2")
FRENCH = answer("fr", "La commande a été expédiée lundi et arrivera chez vous demain matin [D1].")


def judged(*documents: object, review: ReviewSampling | None = None) -> StageOutput:
    messages = [
        IncomingMessage(
            value=d if isinstance(d, bytes) else json.dumps(d).encode(),
            origin=MessageOrigin("answers", 0, offset, b"conv"),
        )
        for offset, d in enumerate(documents)
    ]
    judge = build_judge(JudgeSettings(name="rules"))
    return judge_messages(messages, judge, limits=StageLimits(review=review), now=JUDGED)


def value(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def key(tenant: str = "t", model: str = "llm") -> dict[str, str]:
    return {"tenant": tenant, "assistant": "bot", "model": model}


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


# ------------------------------------------------------------------ judge accuracy

CELL = AccuracyCell(tenant="t", assistant_id="bot", task_type="QA", judge_key="nli-v3")
CELL_KEY = {"tenant": "t", "assistant": "bot", "task_type": "QA", "judge": "nli-v3"}


def accuracy(
    cell: AccuracyCell = CELL, *, negatives: bool = True, drift: tuple[str, ...] = ()
) -> JudgeAccuracyEvent:
    """9 of 10 hallucinations caught, 1 false alarm among 20 faithful answers (weights 1),
    2 of 3 doubly labelled answers agreed on, 8 of 10 claims."""
    state = CellState(
        tp=Tally(n=9, w=9, w2=9),
        fn=Tally(n=1, w=1, w2=1),
        fp=Tally(n=1, w=1, w2=1) if negatives else Tally(),
        tn=Tally(n=19, w=19, w2=19) if negatives else Tally(),
        labelled_answers=30 if negatives else 10,
        labels=33,
        claims_compared=10,
        claims_agreeing=8,
        pairs={"hallucinated|hallucinated": 1, "faithful|faithful": 1, "faithful|hallucinated": 1},
    )
    return accuracy_event(
        cell,
        state,
        offline=ConfusionCounts(tp=8, fn=2, tn=9, fp=1),
        findings=list(drift),
        now=JUDGED,
    )


def test_live_accuracy_gauges_mirror_the_event() -> None:
    metrics = WorkerMetrics()
    sensor: AccuracySensor = metrics  # the accuracy loops' protocol
    event = accuracy(drift=("sensitivity_below_offline",))
    sensor.accuracy(event)
    for figure, estimate in (
        ("sensitivity", event.sensitivity),
        ("specificity", event.specificity),
        ("precision", event.precision),
    ):
        name = f"streamproc_judge_live_{figure}"
        assert value(metrics, name, **CELL_KEY) == estimate.estimate
        assert value(metrics, f"{name}_low", **CELL_KEY) == estimate.low
        assert value(metrics, f"{name}_high", **CELL_KEY) == estimate.high
    assert value(metrics, "streamproc_judge_live_sensitivity", **CELL_KEY) == 0.9
    assert value(metrics, "streamproc_judge_live_specificity", **CELL_KEY) == 0.95
    assert value(metrics, "streamproc_judge_labelled_answers", **CELL_KEY) == 30
    # kappa: p_o = 2/3, first says H 1/3, second 2/3: p_e = 2/9 + 2/9 = 4/9 -> 0.4
    assert value(metrics, "streamproc_judge_reviewer_kappa", **CELL_KEY) == pytest.approx(0.4)
    assert value(metrics, "streamproc_judge_claim_agreement", **CELL_KEY) == 0.8
    drift = {
        f: value(metrics, "streamproc_judge_drift", **CELL_KEY, finding=f) for f in DRIFT_FINDINGS
    }
    assert drift == {
        "sensitivity_below_offline": 1,
        "precision_below_offline": 0,
        "sensitivity_below_baseline": 0,
        "precision_below_baseline": 0,
    }


def test_an_estimate_without_labels_has_no_series() -> None:
    metrics = WorkerMetrics()
    metrics.accuracy(accuracy())
    metrics.accuracy(accuracy(negatives=False))  # no faithful answer labelled (yet)
    assert value(metrics, "streamproc_judge_live_specificity", **CELL_KEY) is None
    assert value(metrics, "streamproc_judge_live_specificity_low", **CELL_KEY) is None
    assert value(metrics, "streamproc_judge_live_sensitivity", **CELL_KEY) == 0.9
    assert value(metrics, "streamproc_judge_labelled_answers", **CELL_KEY) == 10
    assert "streamproc_judge_live_specificity{" not in metrics.render().decode()


def test_drift_alerts_set_their_findings_and_clear_them_when_resolved() -> None:
    metrics = WorkerMetrics()
    alert = JudgeDriftAlert(
        alert_id="judge_drift:t/bot/QA/nli-v3",
        state="firing",
        tenant="t",
        assistant_id="bot",
        cell=CELL,
        findings=["precision_below_baseline"],
        sensitivity=0.9,
        precision=0.5,
        offline_sensitivity=0.8,
        offline_precision=0.9,
        labelled_answers=40,
        at=JUDGED,
    )
    drift = "streamproc_judge_drift"
    metrics.drift(alert)
    assert value(metrics, drift, **CELL_KEY, finding="precision_below_baseline") == 1
    assert value(metrics, drift, **CELL_KEY, finding="sensitivity_below_offline") == 0
    metrics.drift(alert.model_copy(update={"state": "resolved"}))
    assert value(metrics, drift, **CELL_KEY, finding="precision_below_baseline") == 0


def test_labels_are_counted_by_outcome_from_zero() -> None:
    metrics = WorkerMetrics()
    for outcome in LABEL_OUTCOMES:
        assert value(metrics, "streamproc_labels_total", outcome=outcome) == 0
    metrics.label("accepted")
    metrics.label("accepted")
    metrics.label("refused")
    assert value(metrics, "streamproc_labels_total", outcome="accepted") == 2
    assert value(metrics, "streamproc_labels_total", outcome="refused") == 1
    with pytest.raises(ValueError, match="not one of"):
        metrics.label("answer-123")  # never an unbounded label value


def _cell_samples(metrics: WorkerMetrics, cell: dict[str, str]) -> dict[str, float]:
    """Every sample of the cell, by name (and finding)."""
    found: dict[str, float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            labels = dict(sample.labels)
            finding = labels.pop("finding", None)
            if labels == cell:
                found[sample.name if finding is None else f"{sample.name}:{finding}"] = sample.value
    return found


def test_accuracy_cells_expire_when_this_worker_stops_updating_them() -> None:
    """After a rebalance the worker that lost a cell's partition stops exporting it (a
    stale drift 1 would keep the max-over-replicas rule firing); the owner keeps it."""
    now = [1000.0]
    metrics = WorkerMetrics(window_stale_after_s=60.0, clock=lambda: now[0])
    bound = 60.0 * ACCURACY_STALE_FACTOR
    summary = CELL.model_copy(update={"task_type": "Summary"})
    summary_key = {**CELL_KEY, "task_type": "Summary"}
    metrics.accuracy(accuracy(drift=("sensitivity_below_offline",)))
    metrics.accuracy(accuracy(summary))
    metrics.window_rate("t", "bot", "llm", "1m", 0.25, 0.1, 0.45)
    before = _cell_samples(metrics, CELL_KEY)
    assert len(before) == 9 + 3 + len(DRIFT_FINDINGS)  # live figures, n/kappa/agreement
    assert before["streamproc_judge_drift:sensitivity_below_offline"] == 1

    now[0] += 61.0  # the window gauges' own bound: the cells outlive it
    metrics.refresh()
    assert value(metrics, "streamproc_window_hallucination_rate", **key(), window="1m") is None
    assert _cell_samples(metrics, CELL_KEY) == before

    now[0] += bound - 62.0  # QA's last update 1 s short of the bound; Summary refreshed
    metrics.refresh()
    assert _cell_samples(metrics, CELL_KEY) == before
    metrics.accuracy(accuracy(summary))
    now[0] += 2.0  # QA: 1 s past the bound
    text = metrics.render().decode()
    assert _cell_samples(metrics, CELL_KEY) == {}
    assert 'task_type="QA"' not in text
    assert value(metrics, "streamproc_judge_labelled_answers", **summary_key) == 30

    # A drift alert is an update too; a cell reported again comes back in full.
    metrics.drift(
        JudgeDriftAlert(
            alert_id="judge_drift:t/bot/Summary/nli-v3",
            state="firing",
            tenant="t",
            assistant_id="bot",
            cell=summary,
            findings=["precision_below_baseline"],
            sensitivity=0.9,
            precision=0.5,
            offline_sensitivity=0.8,
            offline_precision=0.9,
            labelled_answers=40,
            at=JUDGED,
        )
    )
    now[0] += bound - 1.0
    metrics.refresh()
    drift = "streamproc_judge_drift"
    assert value(metrics, drift, **summary_key, finding="precision_below_baseline") == 1
    metrics.accuracy(accuracy())
    assert _cell_samples(metrics, CELL_KEY) == before | {
        "streamproc_judge_drift:sensitivity_below_offline": 0
    }
    now[0] += 2.0
    metrics.refresh()
    assert _cell_samples(metrics, summary_key) == {}
    assert _cell_samples(metrics, CELL_KEY) != {}


def test_without_expiry_accuracy_cells_stay() -> None:
    now = [0.0]
    metrics = WorkerMetrics(window_stale_after_s=None, clock=lambda: now[0])
    metrics.accuracy(accuracy())
    now[0] += 10 * 86400.0
    metrics.refresh()
    assert value(metrics, "streamproc_judge_labelled_answers", **CELL_KEY) == 30


def test_accuracy_cells_have_their_own_budget() -> None:
    metrics = WorkerMetrics(max_keys=1)
    metrics.window_rate("t", "bot", "llm", "5m", 0.1, 0.05, 0.2)  # another budget
    metrics.accuracy(accuracy())
    metrics.accuracy(accuracy(CELL.model_copy(update={"task_type": "Summary"})))
    assert value(metrics, "streamproc_judge_labelled_answers", **CELL_KEY) == 30
    summary = {**CELL_KEY, "task_type": "Summary"}
    assert value(metrics, "streamproc_judge_labelled_answers", **summary) is None
    assert 'task_type="Summary"' not in metrics.render().decode()


# ------------------------------------------------------------------ over HTTP


def _everything(metrics: WorkerMetrics) -> None:
    """Give every metric of the contract at least one sample."""
    metrics.observe_batch(judged(GOOD, BAD, b"{oops", FRENCH))
    metrics.set_lag("judge", {0: 2})
    metrics.late_event("t", "bot", "llm")
    metrics.window_rate("t", "bot", "llm", "5m", 0.1, 0.05, 0.2)
    metrics.alert_state("t", "bot", "page", True)
    metrics.accuracy(accuracy())
    metrics.label("accepted")


def _probe(live: bool) -> HealthState:
    return HealthState(live=live, ready=True, detail={"judge_lag": 2})


def _sample_labels(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Sample name (a counter's ``_total``, a histogram's base name) -> (type, labels)."""
    seen: dict[str, tuple[str, frozenset[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            name = family.name if family.type == "histogram" else sample.name
            labels = frozenset(sample.labels) - {"le"}
            assert seen.setdefault(name, (family.type, labels)) == (family.type, labels)
    return seen


async def test_the_endpoint_serves_exactly_the_contract_over_http() -> None:
    metrics = WorkerMetrics()
    _everything(metrics)
    server = MetricsServer(metrics, host="127.0.0.1", port=0, probe=lambda: _probe(False))
    await server.start()
    try:
        assert server.port is not None and server.port > 0
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url) as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = await response.text()
            openmetrics = {"Accept": "application/openmetrics-text; version=1.0.0"}
            async with http.get(server.url, headers=openmetrics) as response:
                assert response.headers["Content-Type"].startswith("application/openmetrics-text")
                om_text = await response.text()
            # The OpenMetrics parser has no type hints.
            om_names = {f.name for f in openmetrics_families(om_text)}  # type: ignore[no-untyped-call]
            base = f"http://127.0.0.1:{server.port}"
            async with http.get(f"{base}/livez") as response:
                assert response.status == 503
                assert await response.json() == {"live": False, "judge_lag": 2}
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 200
                assert (await response.json())["ready"] is True
    finally:
        await server.stop()

    assert _sample_labels(text) == CONTRACT
    assert "# HELP streamproc_answers_total Judged answers by action" in text
    assert "streamproc_answers" in om_names and "streamproc_consumer_lag" in om_names
    with pytest.raises(aiohttp.ClientConnectionError):  # stopped means stopped
        async with aiohttp.ClientSession() as http:
            await http.get(f"{base}/metrics")


async def test_without_a_probe_only_metrics_are_served() -> None:
    server = MetricsServer(WorkerMetrics(), host="127.0.0.1", port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{server.port}"
            async with http.get(f"{base}/livez") as response:
                assert response.status == 404
            async with http.get(f"{base}/metrics") as response:
                assert response.status == 200
                assert "streamproc_batch_size_count 0.0" in await response.text()
    finally:
        await server.stop()


def test_the_server_follows_the_settings() -> None:
    metrics = WorkerMetrics()
    assert MetricsServer.from_settings(MetricsSettings(), metrics) is None  # port None: none
    server = MetricsServer.from_settings(MetricsSettings(port=0), metrics)
    assert server is not None
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url


def test_the_hallucinated_series_exists_at_zero_before_the_first_hallucination() -> None:
    from streamproc.inference.options import JudgeSettings
    from streamproc.verdicts.dead_letter import MessageOrigin
    from streamproc.verdicts.stage import IncomingMessage, judge_messages
    from streamproc.wiring import build_judge

    event = {
        "event_id": "e1",
        "answer_id": "a1",
        "conversation_id": "c",
        "tenant": "t",
        "assistant_id": "bot",
        "model": "m",
        "occurred_at": "2026-01-01T00:00:00+00:00",
        "question": "When does the store open?",
        "answer": "The store opens at 9 am.",
        "evidence": [{"id": "D1", "text": "The store opens at 9 am."}],
    }
    message = IncomingMessage(
        value=json.dumps(event).encode(), origin=MessageOrigin("answers", 0, 0, None)
    )
    metrics = WorkerMetrics()
    metrics.observe_batch(judge_messages([message], build_judge(JudgeSettings(name="rules"))))
    value = metrics.registry.get_sample_value(
        "streamproc_answers_hallucinated_total", {"tenant": "t", "assistant": "bot", "model": "m"}
    )
    assert value == 0.0
