"""The gate's alerts (GateUnverifiedHigh, GateShedding): generated with the burn-rate rules,
read only the gate's decisions counter, and behave as deploy/prometheus/tests/gate_test.yml
says, which must fail against rules without the guard, the wait or the grouping it is
about."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamproc.monitor.options import AlertSettings
from streamproc.monitor.prometheus_rules import (
    GATE_DECISIONS_METRIC,
    GATE_FOR,
    GATE_GROUP_LABELS,
    GATE_MIN_DECISIONS,
    GATE_SHED_ALERT_NAME,
    GATE_SHED_RATIO,
    GATE_UNVERIFIED_ALERT_NAME,
    GATE_UNVERIFIED_RATIO,
    GATE_WINDOW,
    rule_groups,
)
from tests.deploy.monitoring import REPO, metric_names, run_tool, tool_or_skip

RULES_FILE = REPO / "deploy/prometheus/rules/streamproc-slo.rules.yml"
GATE_TEST = REPO / "deploy/prometheus/tests/gate_test.yml"
SELECTORS = {
    GATE_UNVERIFIED_ALERT_NAME: ('{verified="false"}', GATE_UNVERIFIED_RATIO),
    GATE_SHED_ALERT_NAME: ('{reason="OVERLOADED"}', GATE_SHED_RATIO),
}


def _gate_rules(document: dict[str, Any]) -> list[dict[str, Any]]:
    (group,) = [g for g in document["groups"] if g["name"] == "streamproc-gate-alerts"]
    return list(group["rules"])


def test_both_alerts_are_tickets_on_the_decisions_counter() -> None:
    rules = _gate_rules(rule_groups(AlertSettings()))
    assert [r["alert"] for r in rules] == [GATE_UNVERIFIED_ALERT_NAME, GATE_SHED_ALERT_NAME]
    for rule in rules:
        selector, ratio = SELECTORS[rule["alert"]]
        assert rule["labels"] == {"severity": "ticket"}
        assert rule["for"] == GATE_FOR == "5m"
        assert metric_names(rule["expr"]) == {GATE_DECISIONS_METRIC}
        lines = [line.strip() for line in rule["expr"].splitlines()]
        by = f"sum by ({', '.join(GATE_GROUP_LABELS)})"
        # the share first (the alert's $value), then the threshold, then the guard
        assert lines[0] == f"{by} (rate({GATE_DECISIONS_METRIC}{selector}[{GATE_WINDOW}]))"
        assert lines[2] == f"{by} (rate({GATE_DECISIONS_METRIC}[{GATE_WINDOW}]))"
        assert lines[3] == f"> {ratio:g}"
        guard = f"and {by} (increase({GATE_DECISIONS_METRIC}[{GATE_WINDOW}])) >= "
        assert lines[4] == f"{guard}{GATE_MIN_DECISIONS}"
        assert rule["annotations"]["runbook_url"] == "docs/gate.md#the-alerts"
    assert GATE_WINDOW == "10m" and GATE_MIN_DECISIONS >= 100
    assert 0 < GATE_SHED_RATIO < GATE_UNVERIFIED_RATIO < 1


def test_the_gate_alerts_follow_no_setting() -> None:
    tuned = AlertSettings(objective=0.02, min_answered=50)
    assert _gate_rules(rule_groups(tuned)) == _gate_rules(rule_groups(AlertSettings()))


def test_the_runbook_anchor_exists() -> None:
    doc = (REPO / "docs/gate.md").read_text()
    assert re.search(r"^## The alerts$", doc, re.MULTILINE), "docs/gate.md#the-alerts"


def test_the_gate_test_runs_after_the_recordings_in_file_order() -> None:
    spec = yaml.safe_load(GATE_TEST.read_text())
    assert [(GATE_TEST.parent / f).resolve() for f in spec["rule_files"]] == [RULES_FILE]
    assert spec["group_eval_order"] == [g["name"] for g in rule_groups(AlertSettings())["groups"]]


def test_promtool_passes_the_gate_test() -> None:
    result = run_tool(tool_or_skip("promtool"), "test", "rules", GATE_TEST)
    assert result.returncode == 0, result.stdout + result.stderr


def _weakened(tmp_path: Path, edit: Any) -> str:
    """The gate test run against the committed rules with ``edit`` applied to the gate
    rules; its output (the run must fail)."""
    document = yaml.safe_load(RULES_FILE.read_text())
    for rule in _gate_rules(document):
        edit(rule)
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(yaml.safe_dump(document))
    shutil.copy(GATE_TEST, tmp_path / "tests")
    result = run_tool(
        tool_or_skip("promtool"), "test", "rules", tmp_path / "tests" / GATE_TEST.name
    )
    assert result.returncode != 0, "gate_test.yml passes against the weakened rules"
    return result.stdout + result.stderr


def _replace(old: str, new: str) -> Any:
    def edit(rule: dict[str, Any]) -> None:
        assert old in rule["expr"]
        rule["expr"] = rule["expr"].replace(old, new)

    return edit


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        # a quiet gate's 60 % on 50 decisions would open a ticket
        (_replace(f">= {GATE_MIN_DECISIONS}", ">= 1"), 'namespace="staging"'),
        # pending for 5m is what keeps minute 30 quiet
        (lambda rule: rule.pop("for"), "time: 30m"),
        # one ticket per replica, not per deployment
        (_replace("sum by (namespace, job)", "sum by (namespace, job, instance)"), 'instance="g1"'),
        # deployments mixed: prod's ticket would lose its namespace
        (_replace("sum by (namespace, job)", "sum"), "exp:"),
    ],
    ids=["no minimum count", "no wait", "per replica", "deployments mixed"],
)
def test_the_gate_test_fails_against_weakened_rules(tmp_path: Path, edit: Any, named: str) -> None:
    assert named in _weakened(tmp_path, edit)
