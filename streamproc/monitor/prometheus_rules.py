"""Prometheus recording and alerting rules for the hallucination objective, generated from
``settings.alerts`` alone, as Sloth and Pyrra generate theirs from one SLO description.

The policy is the worker's own (multi-window, multi-burn-rate, with a minimum sample and a
Wilson guard), expressed on the metric contract so Prometheus can page without the worker's
alert engine: per (tenant, assistant) an error ratio per window (recording rules), the
answered count and the Wilson 95 % lower bound over each long window, then one alerting
rule per burn-rate pair. Pure: a document of plain dicts and strings; rendering it as YAML
is ``streamproc rules``'s job (``streamproc.cli.rules``).

One more alert does not come from the settings: ``JudgeDrift`` (severity ticket), raised
while the worker's ``streamproc_judge_drift`` gauge says a cell's live sensitivity or
precision is significantly below the offline benchmark or its own trailing baseline
(``streamproc.rates.live_accuracy``). The worker decides significance; Prometheus only
waits ``DRIFT_FOR`` so a flapping finding near the threshold opens no ticket.

Two more watch the inline gate (``streamproc gate``), from its
``streamproc_gate_decisions_total{decision, verified, reason}`` counter: ``GateUnverifiedHigh``
when more than ``GATE_UNVERIFIED_RATIO`` of its decisions over ``GATE_WINDOW`` were not
verified (budget, language, overload or judge error: callers got the failure policy's answer,
not a checked one), and ``GateShedding`` when more than ``GATE_SHED_RATIO`` were shed by
admission control (reason ``OVERLOADED``: the gate needs replicas). Both need at least
``GATE_MIN_DECISIONS`` decisions in the window, so a handful of requests never raise them,
and both are kept per (namespace, job): one alert per gate deployment, summed over replicas.
"""

from __future__ import annotations

from typing import Any

from streamproc.monitor.options import AlertSettings, BurnRateWindow

__all__ = [
    "ALERT_NAME",
    "ANSWERED_METRIC",
    "DRIFT_ALERT_NAME",
    "DRIFT_FOR",
    "DRIFT_LABELS",
    "DRIFT_METRIC",
    "DRIFT_RUNBOOK_URL",
    "GATE_DECISIONS_METRIC",
    "GATE_FOR",
    "GATE_GROUP_LABELS",
    "GATE_MIN_DECISIONS",
    "GATE_RUNBOOK_URL",
    "GATE_SHED_ALERT_NAME",
    "GATE_SHED_RATIO",
    "GATE_UNVERIFIED_ALERT_NAME",
    "GATE_UNVERIFIED_RATIO",
    "GATE_WINDOW",
    "GROUP_LABELS",
    "HALLUCINATED_METRIC",
    "MIN_ANSWERED_RECORD",
    "OBJECTIVE_RECORD",
    "OVERFLOW",
    "RUNBOOK_URL",
    "THRESHOLD_RECORD",
    "Z",
    "answered_record",
    "duration",
    "long_windows",
    "ratio_record",
    "rule_groups",
    "wilson_low_record",
    "windows",
]

HALLUCINATED_METRIC = "streamproc_answers_hallucinated_total"
ANSWERED_METRIC = "streamproc_answers_answered_total"
GROUP_LABELS = ("tenant", "assistant")
"""The objective holds per (tenant, assistant): models are summed, tenants never mixed."""
OVERFLOW = "__other__"
"""The label value the worker counts keys past its cardinality budget under
(``streamproc.telemetry.metrics.OTHER``): unrelated keys mixed, so never alerted on."""
_SELECTOR = f'{{tenant!="{OVERFLOW}"}}'
ALERT_NAME = "StreamprocHallucinationBudgetBurn"
RUNBOOK_URL = "README.md#for-on-call-hallucination-alerts"
OBJECTIVE_RECORD = "streamproc:hallucination_objective:ratio"
MIN_ANSWERED_RECORD = "streamproc:hallucination_min_answered:count"
THRESHOLD_RECORD = "streamproc:hallucination_burn_threshold:factor"
DRIFT_ALERT_NAME = "JudgeDrift"
DRIFT_METRIC = "streamproc_judge_drift"
DRIFT_LABELS = ("tenant", "assistant", "task_type", "judge", "finding")
"""One alert per cell and finding, whichever worker replica reports it (max over them)."""
DRIFT_FOR = "15m"
DRIFT_RUNBOOK_URL = "README.md#for-on-call-judge-drift"
GATE_DECISIONS_METRIC = "streamproc_gate_decisions_total"
GATE_UNVERIFIED_ALERT_NAME = "GateUnverifiedHigh"
GATE_SHED_ALERT_NAME = "GateShedding"
GATE_WINDOW = "10m"
GATE_UNVERIFIED_RATIO = 0.2
"""More than this share of decisions unverified: callers mostly get the policy's answer."""
GATE_SHED_RATIO = 0.05
"""More than this share shed (OVERLOADED): admission control is turning requests away."""
GATE_MIN_DECISIONS = 100
"""Fewer decisions than this in ``GATE_WINDOW`` (one every 6 s) never alert: too few to say."""
GATE_FOR = "5m"
GATE_GROUP_LABELS = ("namespace", "job")
"""One alert per gate deployment: replicas summed, two deployments (two namespaces, or
compose's job) never mixed. Labels a target lacks are simply absent."""
GATE_RUNBOOK_URL = "docs/gate.md#the-alerts"
Z = 1.96
"""Two-sided 95 % normal quantile, as ``streamproc.rates.stats.wilson_interval`` uses."""

_LEVEL = "_".join(GROUP_LABELS)
_BY = f"sum by ({', '.join(GROUP_LABELS)})"
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1))


def duration(seconds: float) -> str:
    """A Prometheus duration in its largest whole unit (300 -> ``5m``, 259200 -> ``3d``):
    window names appear in record names, so one window always gets one spelling."""
    millis = round(seconds * 1000)
    if millis <= 0 or abs(millis - seconds * 1000) > 1e-6:
        raise ValueError(f"{seconds!r} s is no whole number of milliseconds above zero")
    for unit, size in _UNITS:
        if millis % size == 0:
            return f"{millis // size}{unit}"
    raise AssertionError("unreachable: every positive integer is a multiple of 1 ms")


def _number(value: float) -> str:
    """A float as PromQL reads it, without binary noise (14.4 * 0.05 -> ``0.72``)."""
    return f"{value:.12g}"


def ratio_record(window: str) -> str:
    """The hallucinated share of answered answers over ``window``."""
    return f"{_LEVEL}:streamproc_hallucination_ratio:rate{window}"


def answered_record(window: str) -> str:
    """Answered answers counted over ``window`` (the minimum-sample guard)."""
    return f"{_LEVEL}:streamproc_answers_answered:increase{window}"


def wilson_low_record(window: str) -> str:
    """The Wilson 95 % lower bound of the ratio over ``window`` (the unlucky-sample guard)."""
    return f"{_LEVEL}:streamproc_hallucination_ratio_wilson_low:rate{window}"


def _pairs(alerts: AlertSettings) -> list[tuple[str, BurnRateWindow]]:
    return [("page", pair) for pair in alerts.page] + [("ticket", pair) for pair in alerts.ticket]


def windows(alerts: AlertSettings) -> list[str]:
    """Every window a pair uses, shortest first, each once."""
    seconds = {s for _, pair in _pairs(alerts) for s in (pair.long_s, pair.short_s)}
    return [duration(s) for s in sorted(seconds)]


def long_windows(alerts: AlertSettings) -> list[str]:
    """The windows the guards apply to (a pair's long window), shortest first."""
    return [duration(s) for s in sorted({pair.long_s for _, pair in _pairs(alerts)})]


def _ratio_expr(window: str) -> str:
    # A key whose hallucinated counter has no series yet reads 0, not "no data".
    hallucinated = f"{_BY} (rate({HALLUCINATED_METRIC}{_SELECTOR}[{window}]))"
    answered = f"{_BY} (rate({ANSWERED_METRIC}{_SELECTOR}[{window}]))"
    return f"(\n  {hallucinated}\n  or\n  0 * {answered}\n)\n/\n{answered}\n"


def _wilson_low_expr(window: str) -> str:
    """(p + z²/2n - z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), p and n recorded over window."""
    p, n = ratio_record(window), answered_record(window)
    z2 = Z * Z
    return (
        "(\n"
        f"  {p}\n"
        f"  + {_number(z2 / 2)} / {n}\n"
        f"  - {_number(Z)} * sqrt({p} * (1 - {p}) / {n} + {_number(z2 / 4)} / ({n} * {n}))\n"
        ")\n"
        f"/\n(1 + {_number(z2)} / {n})\n"
    )


def _sli_rules(alerts: AlertSettings) -> list[dict[str, Any]]:
    """In evaluation order: a group's rules run in sequence, so the Wilson bound reads the
    ratio and the count of the same evaluation."""
    rules: list[dict[str, Any]] = [
        {"record": ratio_record(w), "expr": _ratio_expr(w)} for w in windows(alerts)
    ]
    longs = long_windows(alerts)
    rules += [
        {
            "record": answered_record(w),
            "expr": f"{_BY} (increase({ANSWERED_METRIC}{_SELECTOR}[{w}]))\n",
        }
        for w in longs
    ]
    rules += [{"record": wilson_low_record(w), "expr": _wilson_low_expr(w)} for w in longs]
    return rules


def _meta_rules(alerts: AlertSettings) -> list[dict[str, Any]]:
    """The policy's numbers as series, so dashboards draw thresholds that follow settings."""
    rules: list[dict[str, Any]] = [
        {"record": OBJECTIVE_RECORD, "expr": f"vector({_number(alerts.objective)})"},
        {"record": MIN_ANSWERED_RECORD, "expr": f"vector({alerts.min_answered})"},
    ]
    for severity, pair in _pairs(alerts):
        rules.append(
            {
                "record": THRESHOLD_RECORD,
                "expr": f"vector({_number(pair.factor)})",
                "labels": _pair_labels(severity, pair),
            }
        )
    return rules


def _pair_labels(severity: str, pair: BurnRateWindow) -> dict[str, str]:
    """Pyrra's long/short labels: two pairs of one severity firing for one key stay two
    distinct alerts (identical label sets would collide in ALERTS)."""
    return {
        "severity": severity,
        "long_window": duration(pair.long_s),
        "short_window": duration(pair.short_s),
    }


def _alert_rule(alerts: AlertSettings, severity: str, pair: BurnRateWindow) -> dict[str, Any]:
    long, short = duration(pair.long_s), duration(pair.short_s)
    threshold = _number(pair.factor * alerts.objective)
    objective = _number(alerts.objective)
    # The long window's ratio comes first: an alert's $value is its left-most operand.
    expr = (
        "(\n"
        f"  {ratio_record(long)} > {threshold}\n"
        "  and\n"
        f"  {ratio_record(short)} > {threshold}\n"
        ")\n"
        f"and {answered_record(long)} >= {alerts.min_answered}\n"
    )
    guards = f"at least {alerts.min_answered} answered in {long}"
    if alerts.require_wilson_above_objective:
        expr += f"and {wilson_low_record(long)} > {objective}\n"
        guards += f", Wilson 95 % lower bound over {long} above {_percent(alerts.objective)}"
    factor = _number(pair.factor)
    return {
        "alert": ALERT_NAME,
        "expr": expr,
        "labels": _pair_labels(severity, pair),
        "annotations": {
            "summary": (
                "{{ $labels.tenant }}/{{ $labels.assistant }}: hallucination budget "
                f"burning faster than {factor}x over {long} and {short}"
            ),
            "description": (
                f"More than {_percent(pair.factor * alerts.objective)} of answered answers "
                f"hallucinated over both {long} and {short} ({factor}x the "
                f"{_percent(alerts.objective)} objective); {guards}."
            ),
            "runbook_url": RUNBOOK_URL,
        },
    }


def _percent(ratio: float) -> str:
    return f"{_number(ratio * 100)}%"


def _drift_rule() -> dict[str, Any]:
    return {
        "alert": DRIFT_ALERT_NAME,
        "expr": f"max by ({', '.join(DRIFT_LABELS)}) ({DRIFT_METRIC}) == 1\n",
        "for": DRIFT_FOR,
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": (
                "{{ $labels.tenant }}/{{ $labels.assistant }}: judge {{ $labels.judge }} "
                "drifted on {{ $labels.task_type }} answers ({{ $labels.finding }})"
            ),
            "description": (
                "Measured against reviewer labels, the live accuracy of the judge fell "
                "significantly (one-sided 95 %) below the offline benchmark or the trailing "
                "baseline of this cell: {{ $labels.finding }}. Its flags and corrected rates "
                "here are less trustworthy than the shipped figures say; read the labels it "
                "got wrong."
            ),
            "runbook_url": DRIFT_RUNBOOK_URL,
        },
    }


def _gate_rule(name: str, selector: str, ratio: float, what: str, meaning: str) -> dict[str, Any]:
    """One deployment's share of decisions matching ``selector`` over the window above
    ``ratio``, with at least ``GATE_MIN_DECISIONS`` decisions in it. While none match, the
    numerator has no series and nothing fires, as it should."""
    by = f"sum by ({', '.join(GATE_GROUP_LABELS)})"
    # The share comes first: an alert's $value is its left-most operand.
    expr = (
        f"{by} (rate({GATE_DECISIONS_METRIC}{selector}[{GATE_WINDOW}]))\n"
        f"/\n{by} (rate({GATE_DECISIONS_METRIC}[{GATE_WINDOW}]))\n"
        f"> {_number(ratio)}\n"
        f"and {by} (increase({GATE_DECISIONS_METRIC}[{GATE_WINDOW}])) >= {GATE_MIN_DECISIONS}\n"
    )
    return {
        "alert": name,
        "expr": expr,
        "for": GATE_FOR,
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": (
                f"{{{{ $labels.job }}}}: {{{{ $value | humanizePercentage }}}} of gate "
                f"decisions {what} over {GATE_WINDOW}"
            ),
            "description": (
                f"More than {_percent(ratio)} of the gate's decisions over {GATE_WINDOW} "
                f"were {what} (at least {GATE_MIN_DECISIONS} decisions, for {GATE_FOR}): "
                f"{meaning}"
            ),
            "runbook_url": GATE_RUNBOOK_URL,
        },
    }


def _gate_rules() -> list[dict[str, Any]]:
    return [
        _gate_rule(
            GATE_UNVERIFIED_ALERT_NAME,
            '{verified="false"}',
            GATE_UNVERIFIED_RATIO,
            "unverified",
            "callers got the failure policy's answer (pass unverified or withhold), not a "
            "checked one. The dashboard's Gate row splits them by reason: BUDGET_EXCEEDED "
            "(budgets too small for the judge), LANGUAGE_NOT_SUPPORTED, OVERLOADED, "
            "JUDGE_ERROR.",
        ),
        _gate_rule(
            GATE_SHED_ALERT_NAME,
            '{reason="OVERLOADED"}',
            GATE_SHED_RATIO,
            "shed",
            "admission control answered them at once by policy because the expected wait "
            "exceeded their budget. Add gate replicas (or CPU), or raise the callers' budgets.",
        ),
    ]


def rule_groups(alerts: AlertSettings) -> dict[str, Any]:
    """The rule file's document: SLI recordings, the policy's numbers, the alerts, the
    judge's drift, the gate's decisions."""
    return {
        "groups": [
            {"name": "streamproc-slo-sli-recordings", "rules": _sli_rules(alerts)},
            {"name": "streamproc-slo-meta-recordings", "rules": _meta_rules(alerts)},
            {
                "name": "streamproc-slo-alerts",
                "rules": [_alert_rule(alerts, sev, pair) for sev, pair in _pairs(alerts)],
            },
            {"name": "streamproc-judge-alerts", "rules": [_drift_rule()]},
            {"name": "streamproc-gate-alerts", "rules": _gate_rules()},
        ]
    }
