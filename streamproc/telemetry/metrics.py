"""The worker's Prometheus metrics: the loops' sensors (:mod:`streamproc.telemetry.sensors`), in the
names on-call queries.

The names, label names and meanings are a contract shared with ``deploy/prometheus``
rules and the Grafana dashboard; change them only together. Every metric lives
in a :class:`WorkerMetrics`' own registry, never prometheus-client's global one, so two
workers in one test process (or two tests) never see each other's numbers.

Label cardinality. ``tenant``, ``assistant`` and ``model`` come from producers, so a
buggy or hostile producer could mint a new series per answer. At most ``max_keys``
distinct (tenant, assistant, model) keys get series of their own, first come first served
(a key keeps its series for the life of the process: counters must never vanish);
answers of later keys are counted under ``tenant=assistant=model="__other__"``, so
``sum()`` over a metric stays exact and no admitted key's numbers move, and their window
gauges are left out (a rate mixed over unrelated keys means nothing). The first overflow
is logged as ``metric_keys_capped``. (tenant, assistant) pairs of ``alert_firing``, and
(tenant, assistant, task_type, judge) cells of the judge-accuracy gauges, have budgets of
the same size (a cell past it has no gauges). Other labels are bounded by construction:
actions, verdicts, dead-letter reasons, review-sampling reasons and severities are enums,
windows and partitions come from settings, drift findings and label outcomes are fixed
lists. Never an answer id.

Gauges that describe something another worker may take over (a key's last window, a judge
accuracy cell) expire: a series this worker has not set for a while is removed at the next
scrape (:class:`~streamproc.telemetry._series_budget.Expiry`), so after a rebalance the
replica that lost the partition stops speaking for it, and ``max`` over replicas (the
``JudgeDrift`` rule) hears the owner only.

Intervals are separate ``_low`` / ``_high`` gauges, as the window rates' Wilson bounds
are, rather than a ``bound`` label: Prometheus' naming guide asks that a sum or average
over a label's values mean something, and an average of an estimate with its bounds does
not; separate names also let a query divide or compare them without label matching.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from streamproc.contracts.events import DeadLetterReason, UnverifiedReason, Verdict
from streamproc.contracts.label_events import (
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    RateEstimate,
    SampledBecause,
)
from streamproc.rates.live_accuracy import DRIFT_FINDINGS
from streamproc.telemetry._series_budget import OTHER, Expiry, KeyBudget, Series
from streamproc.telemetry.sensors import PublishedBatch

__all__ = [
    "ACCURACY_STALE_FACTOR",
    "BATCH_SIZE_BUCKETS",
    "DEFAULT_MAX_KEYS",
    "DEFAULT_WINDOW_STALE_AFTER_S",
    "END_TO_END_BUCKETS_S",
    "JUDGE_LATENCY_BUCKETS_S",
    "LABEL_OUTCOMES",
    "OTHER",
    "LagSource",
    "LoopName",
    "WorkerMetrics",
    "window_label",
]

JUDGE_LATENCY_BUCKETS_S: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""The rules judge takes about a millisecond a batch, an NLI judge on a CPU seconds."""

END_TO_END_BUCKETS_S: Final = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""From the answer to its verdict: batching and judging at best, a backlog at worst."""

BATCH_SIZE_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Powers of two around ``worker.batch_max`` (32 by default)."""

DEFAULT_MAX_KEYS: Final = 1000
"""About 20 series per key (3 actions, answered, hallucinated, late, 3 gauges x 3
windows, plus ``_created``): 20,000 series per worker at the cap."""

DEFAULT_WINDOW_STALE_AFTER_S: Final = 900.0
"""A window gauge not updated for this long is dropped: a key that went quiet stops
showing its last rate forever. 15 min covers three hops of a 1 h window every 5 min."""

ACCURACY_STALE_FACTOR: Final = 4
"""A judge-accuracy cell's gauges expire after this many times the window gauges' bound
(1 h by default). A window closes every hop whether or not anything happened; a cell is
updated only when reviewers' labels for it arrive, at human pace, so it needs the longer
bound: four times the ``JudgeDrift`` rule's 15 min ``for``, so a finding the last batch of
labels set still opens its ticket when no further label comes, while a replica that lost the
cell in a rebalance stops reporting it within the hour. The price: a cell with no labels
for an hour goes blank on its owner too, until its next labels. A setting-free multiple, so
turning window expiry off (``window_stale_after_s=None``) turns this off too."""

LABEL_OUTCOMES: Final = ("accepted", "duplicate", "unknown_answer", "refused", "invalid")
"""What the labels loop did with one label (:meth:`WorkerMetrics.label`)."""

LoopName = Literal["judge", "windows"]
LagSource = Callable[[], Mapping[int, int | None]]
"""Per owned partition, its lag in records (None: not known yet)."""

_KEY: Final = ("tenant", "assistant", "model")
_CELL: Final = ("tenant", "assistant", "task_type", "judge")
_FIGURES: Final = ("sensitivity", "specificity", "precision")


class WorkerMetrics:
    """Every metric of one worker, in its own registry, with the methods the loops call.

    Meant to be called from the event loop (the consumer loops and the scrape handler);
    prometheus-client itself is thread-safe, the key budgets and lag bookkeeping are not.
    ``clock`` (monotonic seconds) is for tests of gauge expiry. ``window_stale_after_s``
    bounds the window gauges, :data:`ACCURACY_STALE_FACTOR` times it the accuracy cells';
    None: neither expires."""

    def __init__(
        self,
        *,
        max_keys: int = DEFAULT_MAX_KEYS,
        window_stale_after_s: float | None = DEFAULT_WINDOW_STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_keys < 0:
            raise ValueError(f"max_keys must be >= 0, not {max_keys}")
        self.registry = CollectorRegistry(auto_describe=True)
        self._keys = KeyBudget(max_keys, "tenant,assistant,model")
        self._alert_keys = KeyBudget(max_keys, "tenant,assistant (alerts)")
        self._cell_keys = KeyBudget(max_keys, "tenant,assistant,task_type,judge (accuracy)")
        self._clock = clock
        self._window_expiry = Expiry(window_stale_after_s, self._drop_window)
        self._cell_expiry = Expiry(
            None if window_stale_after_s is None else window_stale_after_s * ACCURACY_STALE_FACTOR,
            self._drop_cell,
        )
        self._lag_partitions: dict[str, set[int]] = {}
        self._lag_sources: dict[str, LagSource] = {}
        r = self.registry
        self._answers = Counter(
            "streamproc_answers_total",
            "Judged answers by action (pass, trim, withhold).",
            [*_KEY, "action"],
            registry=r,
        )
        self._answered = Counter(
            "streamproc_answers_answered_total",
            "Judged answers that were answered (not abstained) and verified: the "
            "objective's denominator.",
            _KEY,
            registry=r,
        )
        self._unverified = Counter(
            "streamproc_answers_unverified_total",
            "Answers that could not be checked (verified false), by reason "
            "(LANGUAGE_NOT_SUPPORTED, BUDGET_EXCEEDED, OVERLOADED, JUDGE_ERROR): outside "
            "the objective, neither answered nor hallucinated.",
            [*_KEY, "reason"],
            registry=r,
        )
        self._hallucinated = Counter(
            "streamproc_answers_hallucinated_total",
            "Answered, verified answers judged hallucinated: the objective's numerator.",
            _KEY,
            registry=r,
        )
        self._claims = Counter(
            "streamproc_claims_total",
            "Claims of judged answers by verdict (supported, contradicted, unsupported, "
            "unverified, unchecked).",
            ["verdict"],
            registry=r,
        )
        self._flags = Counter(
            "streamproc_flags_total", "Flags published, by action.", ["action"], registry=r
        )
        self._dead_letters = Counter(
            "streamproc_dead_letters_total",
            "Inputs dead-lettered, by reason.",
            ["reason"],
            registry=r,
        )
        self._duplicate_events = Counter(
            "streamproc_duplicate_events_total",
            "Answer events not judged again: their (tenant, event_id) was judged in the same "
            "batch or within worker.dedup_horizon_s (acknowledged and dropped).",
            registry=r,
        )
        self._trace_context_dropped = Counter(
            "streamproc_trace_context_dropped_total",
            "Trace-context fields of inputs left out for breaking W3C's limits, by header "
            "(traceparent, tracestate, baggage) and reason (invalid, too_long, "
            "too_many_members).",
            ["header", "reason"],
            registry=r,
        )
        for header in ("traceparent", "tracestate", "baggage"):
            for reason in ("invalid", "too_long", "too_many_members"):
                self._trace_context_dropped.labels(header, reason)  # at 0 from the start
        self._judge_latency = Histogram(
            "streamproc_judge_latency_seconds",
            "Judge time of the micro-batch each answer was in, observed once per answer.",
            buckets=JUDGE_LATENCY_BUCKETS_S,
            registry=r,
        )
        self._end_to_end_latency = Histogram(
            "streamproc_end_to_end_latency_seconds",
            "From an answer's occurred_at to its verdict.",
            buckets=END_TO_END_BUCKETS_S,
            registry=r,
        )
        self._batch_size = Histogram(
            "streamproc_batch_size",
            "Answers (input messages) per judged micro-batch.",
            buckets=BATCH_SIZE_BUCKETS,
            registry=r,
        )
        self._consumer_lag = Gauge(
            "streamproc_consumer_lag",
            "Records not yet processed per owned input partition (loop: judge, windows).",
            ["loop", "partition"],
            registry=r,
        )
        self._late_events = Counter(
            "streamproc_late_events_total",
            "Events too late for any window (past the grace period).",
            _KEY,
            registry=r,
        )
        self._window_rate = Gauge(
            "streamproc_window_hallucination_rate",
            "Hallucinated / answered of the last closed window.",
            [*_KEY, "window"],
            registry=r,
        )
        self._window_low = Gauge(
            "streamproc_window_hallucination_rate_wilson_low",
            "Wilson 95 % lower bound of the last closed window's rate.",
            [*_KEY, "window"],
            registry=r,
        )
        self._window_high = Gauge(
            "streamproc_window_hallucination_rate_wilson_high",
            "Wilson 95 % upper bound of the last closed window's rate.",
            [*_KEY, "window"],
            registry=r,
        )
        self._window_corrected = Gauge(
            "streamproc_window_corrected_hallucination_rate",
            "Estimated true rate of the last closed window (Rogan-Gladen, the judge's "
            "measured accuracy per task type); absent when it cannot be estimated.",
            [*_KEY, "window"],
            registry=r,
        )
        self._alert_firing = Gauge(
            "streamproc_alert_firing",
            "1 while a burn-rate alert is firing, 0 once resolved.",
            ["tenant", "assistant", "severity"],
            registry=r,
        )
        self._live: dict[str, tuple[Gauge, Gauge, Gauge]] = {
            figure: (
                Gauge(
                    f"streamproc_judge_live_{figure}",
                    f"The judge's {figure} against reviewers' labels (weighted by inverse "
                    "inclusion probability); absent while a class has no labels.",
                    _CELL,
                    registry=r,
                ),
                Gauge(
                    f"streamproc_judge_live_{figure}_low",
                    f"Wilson 95 % lower bound of the live {figure} (Kish effective size).",
                    _CELL,
                    registry=r,
                ),
                Gauge(
                    f"streamproc_judge_live_{figure}_high",
                    f"Wilson 95 % upper bound of the live {figure} (Kish effective size).",
                    _CELL,
                    registry=r,
                ),
            )
            for figure in _FIGURES
        }
        self._labelled_answers = Gauge(
            "streamproc_judge_labelled_answers",
            "Answers reviewers labelled (hallucinated or faithful) in the cell.",
            _CELL,
            registry=r,
        )
        self._kappa = Gauge(
            "streamproc_judge_reviewer_kappa",
            "Cohen's kappa between first and second reviewers on doubly labelled answers.",
            _CELL,
            registry=r,
        )
        self._claim_agreement = Gauge(
            "streamproc_judge_claim_agreement",
            "Share of reviewed claims whose reviewer label equals the judge's verdict.",
            _CELL,
            registry=r,
        )
        self._drift = Gauge(
            "streamproc_judge_drift",
            "1 while the live figure named by finding is significantly below the offline "
            "benchmark or the cell's trailing baseline, else 0.",
            [*_CELL, "finding"],
            registry=r,
        )
        self._labels = Counter(
            "streamproc_labels",
            "Reviewer labels handled, by outcome (accepted, duplicate, unknown_answer, "
            "refused, invalid).",
            ["outcome"],
            registry=r,
        )
        for outcome in LABEL_OUTCOMES:  # at 0, so the first of each is an increase
            self._labels.labels(outcome)
        self._review_items = Counter(
            "streamproc_review_items",
            "Answers sent to the review queue, by why they were sampled (flagged, random).",
            ["because"],
            registry=r,
        )
        for because in SampledBecause:
            self._review_items.labels(because.value)

    # ------------------------------------------------------------------ judging loop

    def observe_batch(
        self, output: PublishedBatch, *, published_at: datetime | None = None
    ) -> None:
        """Count one micro-batch once its records are published. End-to-end latency runs
        to ``published_at`` when given (the verdict is visible from then on), else to
        each verdict's ``judged_at``; clock skew never makes it negative."""
        messages = len(output.verdicts) + len(output.dead_letters) + len(output.repeats)
        if messages:
            self._batch_size.observe(messages)
        self._duplicate_events.inc(len(output.repeats))
        for verdict in output.verdicts:
            self._observe_verdict(verdict, published_at)
        for flag in output.flags:
            self._flags.labels(flag.action.value).inc()
        self.dead_letter(*(letter.reason for letter in output.dead_letters))
        for item in output.review_items:
            self._review_items.labels(item.sampled_because.value).inc()

    def _observe_verdict(self, verdict: Verdict, published_at: datetime | None) -> None:
        judgement = verdict.judgement
        key = self._counter_key(verdict.tenant, verdict.assistant_id, verdict.model)
        self._answers.labels(*key, judgement.action.value).inc()
        if not judgement.verified:
            # Counted apart, as the windows count it: an answer nobody checked is neither
            # in the objective's denominator nor in its numerator.
            self._count_unverified(key, judgement.unverified_reason)
        elif not judgement.abstained:
            self._answered.labels(*key).inc()
            # Created at 0 with its key, so Prometheus sees the first hallucination as an
            # increase (a series born at 1 counts nothing in rate()).
            hallucinated = self._hallucinated.labels(*key)
            if judgement.hallucinated:
                hallucinated.inc()
        for claim in judgement.claims:
            self._claims.labels("unchecked" if claim.verdict is None else claim.verdict.value).inc()
        self._judge_latency.observe(verdict.timings.judge_ms / 1000)
        until = published_at or verdict.judged_at
        self._end_to_end_latency.observe(max(0.0, (until - verdict.occurred_at).total_seconds()))

    def _count_unverified(self, key: tuple[str, str, str], reason: UnverifiedReason | None) -> None:
        # Every reason's series created at 0 with the key, as the hallucinated one is:
        # a series born at 1 counts nothing in rate(). Unverified with no reason given
        # is a judge's slip: counted as its error.
        for each in UnverifiedReason:
            counter = self._unverified.labels(*key, each.value)
            if each is (reason or UnverifiedReason.JUDGE_ERROR):
                counter.inc()

    def dead_letter(self, *reasons: DeadLetterReason | str) -> None:
        """Dead letters made outside the judging stage (unreadable records, the window
        loop's bad outcomes)."""
        for reason in reasons:
            self._dead_letters.labels(str(reason)).inc()

    def trace_context_dropped(self, header: str, reason: str) -> None:
        """An input's trace-context field left out (both labels are fixed lists)."""
        self._trace_context_dropped.labels(header, reason).inc()

    # ------------------------------------------------------------------ windows loop

    def late_event(self, tenant: str, assistant: str, model: str) -> None:
        """An event too late for any window (counted, written to the late topic)."""
        self._late_events.labels(*self._counter_key(tenant, assistant, model)).inc()

    def window_rate(
        self,
        tenant: str,
        assistant: str,
        model: str,
        window: str,
        rate: float | None,
        low: float | None,
        high: float | None,
        corrected: float | None = None,
    ) -> None:
        """The rate and Wilson bounds of a key's last closed window (``window``: its size
        as :func:`window_label` writes it), and its corrected rate when there is one.
        ``rate`` None (nothing answered) removes the key's series for that window: no
        data, not zero."""
        series = (tenant, assistant, model, window)
        if rate is None:
            self._drop_window(series)
            return
        if not self._keys.admit((tenant, assistant, model)):
            return
        self._window_rate.labels(*series).set(rate)
        self._window_low.labels(*series).set(math.nan if low is None else low)
        self._window_high.labels(*series).set(math.nan if high is None else high)
        if corrected is None:
            self._window_corrected.remove(*series)
        else:
            self._window_corrected.labels(*series).set(corrected)
        self._window_expiry.touched(series, self._clock())

    def alert_state(self, tenant: str, assistant: str, severity: str, firing: bool) -> None:
        """Mirror an alert's state (severity: page or ticket)."""
        if self._alert_keys.admit((tenant, assistant)):
            self._alert_firing.labels(tenant, assistant, severity).set(1 if firing else 0)

    # ------------------------------------------------------------------ accuracy loops

    def accuracy(self, event: JudgeAccuracyEvent) -> None:
        """Mirror one cell's live accuracy. An estimate or bound that is None (no labels
        of that class yet, no doubly labelled answers) has no series: no data, not 0."""
        cell = self._cell_labels(event.cell.tenant, event.cell.assistant_id, event)
        if cell is None:
            return
        for figure, estimate in (
            ("sensitivity", event.sensitivity),
            ("specificity", event.specificity),
            ("precision", event.precision),
        ):
            self._set_estimate(self._live[figure], cell, estimate)
        self._labelled_answers.labels(*cell).set(event.labelled_answers)
        _set_or_remove(self._kappa, cell, event.kappa)
        agreement = None if event.claim_agreement is None else event.claim_agreement.estimate
        _set_or_remove(self._claim_agreement, cell, agreement)
        self._set_drift(cell, event.drift)
        self._cell_expiry.touched(cell, self._clock())

    def drift(self, alert: JudgeDriftAlert) -> None:
        """Mirror a drift alert: its findings 1 while firing, every finding 0 resolved."""
        cell = self._cell_labels(alert.tenant, alert.assistant_id, alert)
        if cell is not None:
            self._set_drift(cell, alert.findings if alert.state == "firing" else [])
            self._cell_expiry.touched(cell, self._clock())

    def label(self, outcome: str) -> None:
        """One label handled (``outcome``: one of :data:`LABEL_OUTCOMES`)."""
        if outcome not in LABEL_OUTCOMES:
            raise ValueError(f"label outcome {outcome!r} is not one of {LABEL_OUTCOMES}")
        self._labels.labels(outcome).inc()

    def _cell_labels(
        self, tenant: str, assistant: str, of: JudgeAccuracyEvent | JudgeDriftAlert
    ) -> tuple[str, str, str, str] | None:
        cell = (tenant, assistant, of.cell.task_type, of.cell.judge_key)
        return cell if self._cell_keys.admit(cell) else None

    @staticmethod
    def _set_estimate(
        gauges: tuple[Gauge, Gauge, Gauge], cell: tuple[str, ...], estimate: RateEstimate
    ) -> None:
        for gauge, value in zip(
            gauges, (estimate.estimate, estimate.low, estimate.high), strict=True
        ):
            _set_or_remove(gauge, cell, value)

    def _set_drift(self, cell: tuple[str, ...], findings: list[str]) -> None:
        for finding in DRIFT_FINDINGS:
            self._drift.labels(*cell, finding).set(1 if finding in findings else 0)

    # ------------------------------------------------------------------ both loops

    def set_lag(self, loop: LoopName | str, lags: Mapping[int, int | None]) -> None:
        """The lag of every partition ``loop`` owns now. Partitions it no longer owns,
        and those whose lag is not known yet, have no series."""
        known = {partition: lag for partition, lag in lags.items() if lag is not None}
        for gone in self._lag_partitions.get(loop, set()) - known.keys():
            self._consumer_lag.remove(loop, str(gone))
        for partition, lag in known.items():
            self._consumer_lag.labels(loop, str(partition)).set(lag)
        self._lag_partitions[loop] = set(known)

    def add_lag_source(self, loop: LoopName | str, source: LagSource) -> None:
        """Read ``loop``'s lag from ``source`` at every scrape (see :meth:`refresh`)."""
        self._lag_sources[loop] = source

    # ------------------------------------------------------------------ exposition

    def refresh(self) -> None:
        """Bring pulled values up to date: lag from the sources, stale window and accuracy
        gauges dropped. Call on the event loop, where the sources are changed."""
        for loop, source in self._lag_sources.items():
            self.set_lag(loop, source())
        now = self._clock()
        self._window_expiry.expire(now)
        self._cell_expiry.expire(now)

    def render(self) -> bytes:
        """:meth:`refresh`, then the Prometheus text format (0.0.4)."""
        self.refresh()
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ helpers

    def _counter_key(self, tenant: str, assistant: str, model: str) -> tuple[str, str, str]:
        if self._keys.admit((tenant, assistant, model)):
            return tenant, assistant, model
        return OTHER, OTHER, OTHER

    def _drop_window(self, series: Series) -> None:
        gauges = (self._window_rate, self._window_low, self._window_high, self._window_corrected)
        for gauge in gauges:
            gauge.remove(*series)  # a series never set is no error
        self._window_expiry.forget(series)

    def _drop_cell(self, cell: Series) -> None:
        """Every gauge of an accuracy cell (it keeps its place in the cell budget)."""
        gauges = [g for trio in self._live.values() for g in trio]
        gauges += [self._labelled_answers, self._kappa, self._claim_agreement]
        for gauge in gauges:
            gauge.remove(*cell)
        for finding in DRIFT_FINDINGS:
            self._drift.remove(*cell, finding)
        self._cell_expiry.forget(cell)


def _set_or_remove(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
    if value is None:
        gauge.remove(*labels)  # a series never set is no error
    else:
        gauge.labels(*labels).set(value)


def window_label(size_s: float) -> str:
    """A window size as the ``window`` label writes it: 60 -> "1m", 300 -> "5m",
    3600 -> "1h", 86400 -> "1d", 90 -> "90s", 5400 -> "90m"."""
    seconds = round(size_s)
    if seconds <= 0 or not math.isclose(seconds, size_s):
        raise ValueError(f"a window is a positive whole number of seconds, not {size_s!r}")
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % length == 0:
            return f"{seconds // length}{unit}"
    return f"{seconds}s"
