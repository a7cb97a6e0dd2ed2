"""The worker's metrics over HTTP: the contract's names and labels as a scraper sees them,
the probes beside them, the server following the settings, and a series that exists at
zero before its first count."""

from __future__ import annotations

import json

import aiohttp
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.telemetry.options import MetricsSettings
from streamproc.web.health import HealthState
from streamproc.web.metrics_server import MetricsServer
from tests.unit.telemetry.metrics_samples import BAD, FRENCH, GOOD, accuracy, judged

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
