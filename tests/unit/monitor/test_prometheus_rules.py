"""The Prometheus burn-rate rules: generated from settings.alerts, committed as generated,
valid for promtool, and behaving as the promtool unit tests in deploy/prometheus/tests say
(which must fail against a policy without the guards they are about)."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamproc.cli.rules import rule_files, to_yaml
from streamproc.monitor.options import AlertSettings, BurnRateWindow
from streamproc.monitor.prometheus_rules import (
    ALERT_NAME,
    DRIFT_ALERT_NAME,
    DRIFT_FOR,
    DRIFT_LABELS,
    DRIFT_METRIC,
    OVERFLOW,
    Z,
    answered_record,
    duration,
    long_windows,
    ratio_record,
    rule_groups,
    wilson_low_record,
    windows,
)
from streamproc.rates.stats import wilson_interval
from streamproc.telemetry.metrics import OTHER
from tests.deploy.monitoring import REPO, contract_metrics, metric_names, run_tool, tool_or_skip

RULES_FILE = REPO / "deploy/prometheus/rules/streamproc-slo.rules.yml"
PROMTOOL_TESTS = sorted((REPO / "deploy/prometheus/tests").glob("*.yml"))


def _rules(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in document["groups"] for rule in group["rules"]]


def _alerts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The burn-rate alerts."""
    return [rule for rule in _rules(document) if rule.get("alert") == ALERT_NAME]


def _generate(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``streamproc rules`` as a user runs it, with no STREAMPROC_* variable but those given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAMPROC_")}
    return subprocess.run(
        [sys.executable, "-m", "streamproc", "rules", *map(str, args)],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(300, "5m"), (1800, "30m"), (3600, "1h"), (21600, "6h"), (259200, "3d"), (90, "90s"),
     (5400, "90m"), (0.5, "500ms"), (86400 * 7, "7d")],
)  # fmt: skip
def test_durations_take_their_largest_whole_unit(seconds: float, expected: str) -> None:
    assert duration(seconds) == expected


@pytest.mark.parametrize("seconds", [0, -60, 0.0001])
def test_a_window_prometheus_cannot_spell_is_refused(seconds: float) -> None:
    with pytest.raises(ValueError, match="milliseconds"):
        duration(seconds)


def test_the_committed_rules_are_what_the_settings_generate() -> None:
    assert yaml.safe_load(RULES_FILE.read_text()) == rule_groups(AlertSettings())
    checked = _generate("check", "-o", RULES_FILE.parent)
    assert checked.returncode == 0, checked.stderr
    assert rule_files(AlertSettings()) == {RULES_FILE.name: RULES_FILE.read_text()}


def test_check_names_each_stale_file_on_one_line(tmp_path: Path) -> None:
    drifted = tmp_path / RULES_FILE.name
    drifted.write_text(RULES_FILE.read_text().replace("> 0.72", "> 0.7"))
    checked = _generate("check", "-o", tmp_path)
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"{drifted} differs from what settings.alerts generates "
        f"(run: streamproc rules write -o {tmp_path})"
    ]
    drifted.unlink()
    checked = _generate("check", "--output", tmp_path)
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"{drifted} missing (run: streamproc rules write -o {tmp_path})"
    ]


def test_the_yaml_reads_back_as_the_document() -> None:
    """Written without PyYAML (not a run-time dependency): quoting where YAML 1.1 would
    read another type or an indicator, literal blocks for lines."""
    texts = ["5m", "yes", "1.5", "0x1f", "~", "- x", "{{ $value }}", "it's: here", "a #b", ""]
    texts += ["two\nlines\n", "two\nlines", "a\n\nb\n", " lead\nx\n", "ünïcode", "tab\tx"]
    document = {"groups": [{"name": "g", "rules": [{"labels": {"k": t}} for t in texts]}]}
    assert yaml.safe_load(to_yaml(document)) == document
    assert to_yaml({"a": {"b": "5m"}, "c": ["d"]}) == "a:\n  b: 5m\nc:\n- d\n"


def test_tuned_settings_from_the_environment_generate_tuned_rules(tmp_path: Path) -> None:
    out = tmp_path / RULES_FILE.name
    env = {
        "STREAMPROC_ALERTS__OBJECTIVE": "0.02",
        "STREAMPROC_ALERTS__MIN_ANSWERED": "50",
        "STREAMPROC_ALERTS__PAGE": '[{"long_s": 7200, "short_s": 600, "factor": 10}]',
    }
    written = _generate("write", "--output", tmp_path, env=env)
    assert written.returncode == 0, written.stderr
    tuned = AlertSettings(
        objective=0.02, min_answered=50, page=[BurnRateWindow(long_s=7200, short_s=600, factor=10)]
    )
    assert yaml.safe_load(out.read_text()) == rule_groups(tuned)
    (page, _ticket) = _alerts(rule_groups(tuned))
    assert f"{ratio_record('2h')} > 0.2\n" in page["expr"]
    assert f"{ratio_record('10m')} > 0.2\n" in page["expr"]
    assert f"{answered_record('2h')} >= 50\n" in page["expr"]


def test_every_window_has_its_ratio_and_every_long_window_its_guards() -> None:
    alerts = AlertSettings()
    assert windows(alerts) == ["5m", "30m", "1h", "6h", "3d"]
    assert long_windows(alerts) == ["1h", "6h", "3d"]
    records = [rule["record"] for rule in _rules(rule_groups(alerts)) if "record" in rule]
    for window in windows(alerts):
        assert ratio_record(window) in records
    for window in long_windows(alerts):
        assert answered_record(window) in records
        assert wilson_low_record(window) in records


def test_ratios_are_kept_per_tenant_and_assistant_without_the_overflow_key() -> None:
    assert OVERFLOW == OTHER, "the worker's overflow label value changed"
    alerts = AlertSettings()
    from_counters = [ratio_record(w) for w in windows(alerts)]
    from_counters += [answered_record(w) for w in long_windows(alerts)]
    rules = {rule.get("record"): rule["expr"] for rule in _rules(rule_groups(alerts))}
    for record in from_counters:
        sums = re.findall(r"sum by \(([^)]*)\)", rules[record])
        selectors = re.findall(r"streamproc_\w+_total(\{[^}]*\})?\[", rules[record])
        assert sums and all(s == "tenant, assistant" for s in sums), record
        assert selectors and all(c == f'{{tenant!="{OTHER}"}}' for c in selectors), record


def test_a_wilson_bound_is_recorded_after_what_it_reads() -> None:
    """A group's rules run in order: the bound must read this evaluation's ratio and count."""
    (sli, *_) = rule_groups(AlertSettings())["groups"]
    order = [rule["record"] for rule in sli["rules"]]
    for window in long_windows(AlertSettings()):
        bound = order.index(wilson_low_record(window))
        assert order.index(ratio_record(window)) < bound
        assert order.index(answered_record(window)) < bound


@pytest.mark.parametrize(("hits", "n"), [(3, 4), (4, 40), (40, 400), (0, 30), (30, 30), (1, 1)])
def test_the_promql_wilson_bound_is_the_one_the_worker_computes(hits: int, n: int) -> None:
    """The recorded expression, evaluated with the ratio and the count put in, gives
    ``streamproc.rates.stats.wilson_interval``'s lower bound (PromQL arithmetic reads as Python)."""
    (rule,) = [
        r
        for r in _rules(rule_groups(AlertSettings()))
        if r.get("record") == wilson_low_record("1h")
    ]
    expr = (
        rule["expr"]
        .replace(ratio_record("1h"), repr(hits / n))
        .replace(answered_record("1h"), repr(float(n)))
    )
    assert re.fullmatch(r"[\d\s.+\-*/()sqrt]+", expr), "only numbers, arithmetic and sqrt left"
    value = eval(" ".join(expr.split()), {"__builtins__": {}}, {"sqrt": math.sqrt})
    low, _ = wilson_interval(hits, n, z=Z) or (math.nan, math.nan)
    assert value == pytest.approx(low, abs=1e-12)


def test_each_pair_alerts_on_both_windows_with_both_guards() -> None:
    alerts = AlertSettings()
    rules = _alerts(rule_groups(alerts))
    pairs = [("page", p) for p in alerts.page] + [("ticket", p) for p in alerts.ticket]
    assert len(rules) == len(pairs) == 3
    for rule, (severity, pair) in zip(rules, pairs, strict=True):
        long, short = duration(pair.long_s), duration(pair.short_s)
        threshold = f"{pair.factor * alerts.objective:.12g}"
        assert rule["alert"] == ALERT_NAME
        assert rule["labels"] == {"severity": severity, "long_window": long, "short_window": short}
        lines = [line.strip() for line in rule["expr"].splitlines()]
        # the long window first: it is the alert's $value
        assert lines[1] == f"{ratio_record(long)} > {threshold}"
        assert f"{ratio_record(short)} > {threshold}" in lines
        assert f"and {answered_record(long)} >= {alerts.min_answered}" in lines
        assert f"and {wilson_low_record(long)} > {alerts.objective:g}" in lines
        assert rule["annotations"]["runbook_url"].startswith("README.md#for-on-call")
        percent = f"{pair.factor * alerts.objective * 100:.12g}%"
        assert rule["annotations"]["description"].startswith(f"More than {percent} of answered")


def test_the_wilson_guard_can_be_turned_off() -> None:
    alerts = AlertSettings(require_wilson_above_objective=False)
    for rule in _alerts(rule_groups(alerts)):
        assert "wilson" not in rule["expr"]
        assert "Wilson" not in rule["annotations"]["description"]


# ---------------------------------------------------------------------------- promtool


@pytest.mark.outside_tool
def test_promtool_accepts_the_rules() -> None:
    promtool = tool_or_skip("promtool")
    checked = run_tool(promtool, "check", "rules", RULES_FILE)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_rules(rule_groups(AlertSettings())))} rules found" in checked.stdout


@pytest.mark.outside_tool
def test_promtool_unit_tests_pass() -> None:
    promtool = tool_or_skip("promtool")
    assert {p.name for p in PROMTOOL_TESTS} >= {
        "judge_drift_test.yml",
        "spike_test.yml",
        "guards_test.yml",
        "slow_burn_test.yml",
    }
    result = run_tool(promtool, "test", "rules", *PROMTOOL_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(PROMTOOL_TESTS)


@pytest.mark.parametrize("test_file", PROMTOOL_TESTS, ids=lambda p: p.name)
def test_promtool_tests_read_the_committed_rules_in_their_order(test_file: Path) -> None:
    """Without ``group_eval_order`` promtool evaluates the groups in a random order, and an
    alert may read the recordings of the evaluation before (a flaky test)."""
    spec = yaml.safe_load(test_file.read_text())
    assert [(test_file.parent / f).resolve() for f in spec["rule_files"]] == [RULES_FILE]
    groups = [group["name"] for group in rule_groups(AlertSettings())["groups"]]
    assert spec["group_eval_order"] == groups


def _weakened_run(tmp_path: Path, rules_text: str, test_file: str) -> str:
    """Run one promtool test file against other rules; its output (the run must fail)."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "rules" / RULES_FILE.name).write_text(rules_text)
    shutil.copy(REPO / "deploy/prometheus/tests" / test_file, tmp_path / "tests")
    result = run_tool(tool_or_skip("promtool"), "test", "rules", tmp_path / "tests" / test_file)
    assert result.returncode != 0, f"{test_file} passes against the weakened rules"
    return result.stdout + result.stderr


def _render(alerts: AlertSettings) -> str:
    return yaml.safe_dump(rule_groups(alerts), sort_keys=False)


@pytest.mark.outside_tool
def test_the_quiet_hour_test_fails_without_the_minimum_sample(tmp_path: Path) -> None:
    output = _weakened_run(tmp_path, _render(AlertSettings(min_answered=1)), "guards_test.yml")
    assert 'assistant="quiet"' in output


@pytest.mark.outside_tool
def test_the_small_sample_test_fails_without_the_wilson_guard(tmp_path: Path) -> None:
    rules = _render(AlertSettings(require_wilson_above_objective=False))
    assert 'assistant="thin"' in _weakened_run(tmp_path, rules, "guards_test.yml")


@pytest.mark.outside_tool
def test_the_tenant_test_fails_when_tenants_are_summed_together(tmp_path: Path) -> None:
    rules = RULES_FILE.read_text().replace("sum by (tenant, assistant)", "sum by (assistant)")
    assert "two tenants with the same assistant id" in _weakened_run(
        tmp_path, rules, "guards_test.yml"
    )


@pytest.mark.outside_tool
def test_the_spike_test_fails_without_the_short_window(tmp_path: Path) -> None:
    """With the 1h window alone, the page would outlast the spike by a quarter of an hour."""
    no_short = rule_groups(AlertSettings())
    for rule in _alerts(no_short):
        rule["expr"] = re.sub(r"\n  and\n  [^\n]*:rate(5m|30m|6h) > [\d.]+", "", rule["expr"])
    output = _weakened_run(tmp_path, yaml.safe_dump(no_short), "spike_test.yml")
    assert "time: 7h3m" in output


@pytest.mark.outside_tool
def test_the_slow_burn_test_fails_if_a_slow_burn_pages(tmp_path: Path) -> None:
    tighter = AlertSettings(page=[BurnRateWindow(long_s=21600, short_s=1800, factor=3.0)])
    output = _weakened_run(tmp_path, _render(tighter), "slow_burn_test.yml")
    assert 'severity="page"' in output


@pytest.mark.outside_tool
def test_prometheus_config_loads_the_rules(tmp_path: Path) -> None:
    """promtool checks the config with rule_files pointed from the container's path to
    the repository's (compose mounts one onto the other; test_compose checks that)."""
    promtool = tool_or_skip("promtool")
    config_file = REPO / "deploy/prometheus/prometheus.yml"
    config = yaml.safe_load(config_file.read_text())
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    config["rule_files"] = [str(RULES_FILE.parent / "*.yml")]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    checked = run_tool(promtool, "check", "config", local)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = len(_rules(rule_groups(AlertSettings())))
    assert f"SUCCESS: {rules} rules found" in checked.stdout


# ---------------------------------------------------------------------------- judge drift


def _drift_rule(document: dict[str, Any]) -> dict[str, Any]:
    (rule,) = [r for r in _rules(document) if r.get("alert") == DRIFT_ALERT_NAME]
    return rule


def test_judge_drift_is_a_ticket_on_the_workers_drift_gauge() -> None:
    rule = _drift_rule(rule_groups(AlertSettings()))
    assert rule["labels"] == {"severity": "ticket"}
    assert rule["for"] == DRIFT_FOR == "15m"
    assert metric_names(rule["expr"]) == {DRIFT_METRIC}
    assert DRIFT_METRIC in contract_metrics(), "the worker exposes no such gauge"
    sums = re.findall(r"max by \(([^)]*)\)", rule["expr"])
    assert sums == [", ".join(DRIFT_LABELS)]
    assert rule["expr"].strip().endswith("== 1")
    # it follows no setting: tuned alerts leave it as it is
    assert _drift_rule(rule_groups(AlertSettings(objective=0.02))) == rule


@pytest.mark.outside_tool
def test_the_drift_test_fails_without_the_wait(tmp_path: Path) -> None:
    hasty = rule_groups(AlertSettings())
    del _drift_rule(hasty)["for"]
    output = _weakened_run(tmp_path, yaml.safe_dump(hasty), "judge_drift_test.yml")
    assert "time: 20m" in output


@pytest.mark.outside_tool
def test_the_drift_test_fails_when_replicas_are_kept_apart(tmp_path: Path) -> None:
    apart = rule_groups(AlertSettings())
    _drift_rule(apart)["expr"] = f"{DRIFT_METRIC} == 1\n"
    output = _weakened_run(tmp_path, yaml.safe_dump(apart), "judge_drift_test.yml")
    assert 'instance="w0"' in output
