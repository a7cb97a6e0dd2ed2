"""Helpers shared by the tests of deploy/prometheus, deploy/alertmanager and deploy/grafana:
the Prometheus tools (promtool, amtool), the metric names the worker and the gate expose,
and the metric names a PromQL expression reads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from streamproc.config import Settings
from streamproc.gate.metrics import GateMetrics
from streamproc.monitor.options import AlertSettings
from streamproc.monitor.prometheus_rules import rule_groups
from streamproc.telemetry.metrics import WorkerMetrics

__all__ = [
    "BUILTIN_SERIES",
    "REPO",
    "contract_metrics",
    "metric_names",
    "recorded_metrics",
    "run_tool",
    "tool_or_skip",
]

REPO = Path(__file__).resolve().parents[2]
BUILTIN_SERIES = frozenset({"ALERTS", "ALERTS_FOR_STATE", "up"})
"""Series Prometheus makes itself, which a dashboard may read."""

_PACKAGES = {"promtool": "prometheus", "amtool": "prometheus-alertmanager"}
_SERIES_OF = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
}
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
     "bool", "offset", "inf", "nan"}
)  # fmt: skip


def tool_or_skip(name: str) -> str:
    """Path of promtool or amtool. Missing: skip on a laptop, but fail under ``CI=true``,
    where scripts/test.sh installs them, so a CI run can never pass without these checks."""
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not installed (apt-get install {_PACKAGES[name]})"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; CI is set, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


def run_tool(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    """Run a tool, output captured; the caller asserts on the exit status."""
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=120, check=False
    )


def contract_metrics() -> frozenset[str]:
    """Every series name the worker's and the gate's registries expose (counters as
    ``_total``, histograms as ``_bucket``, ``_count``, ``_sum``), read from the real
    ``WorkerMetrics`` and ``GateMetrics``."""
    names: set[str] = set()
    registries = (WorkerMetrics().registry, GateMetrics(Settings().gate).registry)
    for family in (f for registry in registries for f in registry.collect()):
        names.update(family.name + suffix for suffix in _SERIES_OF[family.type])
    return frozenset(names)


def recorded_metrics(alerts: AlertSettings | None = None) -> frozenset[str]:
    """The names the generated recording rules record."""
    groups = rule_groups(alerts or AlertSettings())["groups"]
    return frozenset(r["record"] for g in groups for r in g["rules"] if "record" in r)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(...)`` query)
    reads: identifiers that are not functions, keywords, label names or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings: label values, Grafana vars
    text = re.sub(r"\{[^}]*\}", " ", text)  # matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries
    text = re.sub(r"\boffset\s+\S+", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"label_values\(\s*([A-Za-z_:][\w:]*)?\s*,\s*\w+\s*\)", r" \1 ", text)
    text = re.sub(r"\$\w+", " ", text)
    text = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", text)
    names: set[str] = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group(0) not in _KEYWORDS:
            names.add(match.group(0))
    return names
