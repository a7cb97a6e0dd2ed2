"""The worker's judge-accuracy metrics: gauges that mirror the live accuracy event, drift
findings set and cleared, labels counted by outcome, and accuracy cells that expire
when this worker stops updating them and stay within their own budget."""

from __future__ import annotations

import pytest

from streamproc.contracts.label_events import JudgeDriftAlert
from streamproc.rates.live_accuracy import DRIFT_FINDINGS
from streamproc.telemetry.metrics import ACCURACY_STALE_FACTOR, LABEL_OUTCOMES, WorkerMetrics
from streamproc.telemetry.sensors import AccuracySensor
from tests.unit.telemetry.metrics_samples import CELL, CELL_KEY, JUDGED, accuracy, key, value

# ------------------------------------------------------------------ judge accuracy


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
