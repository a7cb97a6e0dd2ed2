"""deploy/grafana: the dashboards are valid, their panels read only series that exist (the
worker's metrics, the generated recording rules, Prometheus' own ALERTS) through the
provisioned datasource, and their PromQL parses (promtool, where installed). Each checker
is shown a broken copy and must name the break."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from streamproc.monitor.prometheus_rules import ALERT_NAME, OBJECTIVE_RECORD, THRESHOLD_RECORD
from tests.deploy.monitoring import (
    BUILTIN_SERIES,
    REPO,
    contract_metrics,
    metric_names,
    recorded_metrics,
    run_tool,
    tool_or_skip,
)

GRAFANA = REPO / "deploy/grafana"
DASHBOARD_FILES = sorted((GRAFANA / "dashboards").glob("*.json"))
MAIN_DASHBOARD = GRAFANA / "dashboards/streamproc.json"
GRID_COLUMNS = 24
# Grafana's own variables, with a value that makes the query valid PromQL.
GRAFANA_VARIABLES = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}
_VARIABLE = re.compile(r"\$\{?(\w+)")

Dashboard = dict[str, Any]


def _load(path: Path) -> Dashboard:
    return cast(Dashboard, json.loads(path.read_text()))


@pytest.fixture(scope="module")
def dashboard() -> Dashboard:
    return _load(MAIN_DASHBOARD)


@pytest.fixture(scope="module")
def datasource_uids() -> set[str]:
    uids: set[str] = set()
    for path in (GRAFANA / "provisioning/datasources").glob("*.yml"):
        uids |= {d["uid"] for d in yaml.safe_load(path.read_text())["datasources"]}
    return uids


@pytest.fixture(scope="module")
def known_series() -> frozenset[str]:
    return contract_metrics() | recorded_metrics() | BUILTIN_SERIES


def panels(dashboard: Dashboard) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: Dashboard) -> Iterator[tuple[str, str]]:
    """(where, query) for every panel target and every query variable."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {target.get('refId')}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield (
                f"variable {variable['name']}",
                query["query"] if isinstance(query, dict) else query,
            )


def _datasources(dashboard: Dashboard) -> Iterator[tuple[str, Any]]:
    for panel in panels(dashboard):
        if panel["type"] != "row":
            yield f"panel {panel['id']}", panel.get("datasource")
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {target.get('refId')}", target.get("datasource")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable.get("datasource")


def dashboard_problems(
    dashboard: Dashboard, datasource_uids: set[str], known_series: frozenset[str]
) -> list[str]:
    """What would show an empty or broken panel."""
    problems: list[str] = []
    ids = Counter(panel.get("id") for panel in panels(dashboard))
    problems += [f"panel id {i} used {n} times" for i, n in ids.items() if n > 1 or i is None]
    for where, source in _datasources(dashboard):
        uid = source.get("uid") if isinstance(source, dict) else None
        if uid not in datasource_uids:
            problems.append(f"{where}: datasource {source!r} is not provisioned")
    for where, query in queries(dashboard):
        for name in sorted(metric_names(query) - known_series):
            problems.append(f"{where}: reads {name}, which nothing records or exposes")
    defined = {v["name"] for v in dashboard["templating"]["list"]} | set(GRAFANA_VARIABLES)
    for panel in panels(dashboard):
        text = json.dumps([panel.get("title"), panel.get("targets", [])])
        for name in sorted(set(_VARIABLE.findall(text)) - defined):
            problems.append(f"panel {panel['id']}: ${name} is not a variable")
        repeat = panel.get("repeat")
        if repeat:
            variable: dict[str, Any] = next(
                (v for v in dashboard["templating"]["list"] if v["name"] == repeat), {}
            )
            if not variable.get("multi"):
                problems.append(f"panel {panel['id']}: repeats over {repeat}, not a multi-value")
        grid = panel["gridPos"]
        if grid["x"] < 0 or grid["x"] + grid["w"] > GRID_COLUMNS:
            problems.append(f"panel {panel['id']}: wider than the grid")
    return problems


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_dashboard_is_json_with_a_uid_and_title(path: Path) -> None:
    loaded = _load(path)
    assert re.fullmatch(r"[\w-]{1,40}", loaded["uid"]), "Grafana uids are at most 40 chars"
    assert loaded["title"] and loaded["schemaVersion"] >= 36
    assert loaded.get("id") is None, "a provisioned dashboard carries no database id"


def test_the_dashboard_is_sound(
    dashboard: Dashboard, datasource_uids: set[str], known_series: frozenset[str]
) -> None:
    assert DASHBOARD_FILES == [MAIN_DASHBOARD]
    assert datasource_uids == {"prometheus"}
    assert not dashboard_problems(dashboard, datasource_uids, known_series)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d["panels"][2].update(id=d["panels"][1]["id"]), "used 2 times"),
        (
            lambda d: d["panels"][1]["targets"][0].update(datasource={"uid": "mimir"}),
            "datasource {'uid': 'mimir'} is not provisioned",
        ),
        (
            lambda d: d["panels"][1]["targets"][0].update(
                expr="rate(streamproc_answers_judged_total[5m])"
            ),
            "reads streamproc_answers_judged_total, which nothing records or exposes",
        ),
        (
            lambda d: d["panels"][1]["targets"][0].update(
                expr="tenant_assistant:streamproc_hallucination_ratio:rate2h"
            ),
            "reads tenant_assistant:streamproc_hallucination_ratio:rate2h",
        ),
        (lambda d: d["templating"]["list"].pop(), "$window is not a variable"),
        (lambda d: d["templating"]["list"][1].update(multi=False), "not a multi-value"),
        (lambda d: d["panels"][1]["gridPos"].update(x=12), "wider than the grid"),
        (
            lambda d: _judge_panels(d)[0]["targets"][0].update(
                expr='streamproc_judge_live_recall{tenant="$tenant"}'
            ),
            "reads streamproc_judge_live_recall, which nothing records or exposes",
        ),
        (
            lambda d: next(v for v in d["templating"]["list"] if v["name"] == "judge").update(
                name="judge_key"
            ),
            "$judge is not a variable",
        ),
    ],
)
def test_the_checker_names_a_broken_dashboard(
    dashboard: Dashboard,
    datasource_uids: set[str],
    known_series: frozenset[str],
    mutate: Any,
    problem: str,
) -> None:
    broken = copy.deepcopy(dashboard)
    mutate(broken)
    problems = dashboard_problems(broken, datasource_uids, known_series)
    assert any(problem in p for p in problems), problems


def test_the_dashboard_shows_what_on_call_needs(dashboard: Dashboard) -> None:
    """Rates with their Wilson bands, the alert policy's numbers, verdict mix, flags,
    latency, lag, dead letters, and alert states: each read somewhere."""
    read = set().union(*(metric_names(q) for _, q in queries(dashboard)))
    wanted = {
        "streamproc_window_hallucination_rate",
        "streamproc_window_hallucination_rate_wilson_low",
        "streamproc_window_hallucination_rate_wilson_high",
        "tenant_assistant:streamproc_hallucination_ratio:rate5m",
        OBJECTIVE_RECORD,
        THRESHOLD_RECORD,
        "streamproc_claims_total",
        "streamproc_flags_total",
        "streamproc_judge_latency_seconds_bucket",
        "streamproc_consumer_lag",
        "streamproc_dead_letters_total",
        "streamproc_alert_firing",
        "ALERTS",
    }
    assert wanted <= read, wanted - read
    exprs = " ".join(q for _, q in queries(dashboard))
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.95," in exprs
    assert f'ALERTS{{alertname="{ALERT_NAME}"' in exprs


def test_the_band_fills_between_the_wilson_bounds(dashboard: Dashboard) -> None:
    (band,) = [
        p for p in panels(dashboard) if p.get("repeat") == "assistant" and "Wilson" in p["title"]
    ]
    legends = {t["legendFormat"]: t["expr"] for t in band["targets"]}
    assert "_wilson_low{" in legends["Wilson low"]
    assert "_wilson_high{" in legends["Wilson high"]
    fills = {
        o["matcher"]["options"]: prop["value"]
        for o in band["fieldConfig"]["overrides"]
        for prop in o["properties"]
        if prop["id"] == "custom.fillBelowTo"
    }
    assert fills == {"Wilson high": "Wilson low"}
    # one series per legend: the band is drawn for one (tenant, assistant, model, window)
    gauges = [e for e in legends.values() if "streamproc_window_hallucination_rate" in e]
    assert len(gauges) == 3
    for expr in gauges:
        for label in ("tenant", "assistant", "model", "window"):
            assert f'{label}="${label}"' in expr


def _as_promql(query: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        query = query.replace(f"${name}", value)
    return query


def test_promtool_parses_every_panel_query(dashboard: Dashboard, tmp_path: Path) -> None:
    """Each query becomes a recording rule in a scratch file that promtool checks."""
    promtool = tool_or_skip("promtool")
    rules = [
        {"record": f"dashboard:query_{i}", "expr": _as_promql(query)}
        for i, (where, query) in enumerate(queries(dashboard))
        if not where.startswith("variable")  # label_values() is Grafana's, not PromQL
    ]
    scratch = tmp_path / "dashboard.rules.yml"
    scratch.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = run_tool(promtool, "check", "rules", scratch)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout

    rules[0]["expr"] = "sum by (tenant (rate(streamproc_claims_total[1m]))"
    scratch.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert run_tool(promtool, "check", "rules", scratch).returncode != 0


def test_provisioning_loads_the_dashboards_from_one_folder() -> None:
    (provider,) = yaml.safe_load((GRAFANA / "provisioning/dashboards/streamproc.yml").read_text())[
        "providers"
    ]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    (datasource,) = yaml.safe_load(
        (GRAFANA / "provisioning/datasources/prometheus.yml").read_text()
    )["datasources"]
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True


def _judge_panels(dashboard: Dashboard) -> list[dict[str, Any]]:
    """The panels of the "Judge vs reviewers" row (those below it, to the next row)."""
    return _row_panels(dashboard, "Judge vs reviewers")


def _row_panels(dashboard: Dashboard, title: str) -> list[dict[str, Any]]:
    """The panels of the row ``title`` (those below it, to the next row)."""
    top: list[dict[str, Any]] = dashboard["panels"]
    start = next(i for i, p in enumerate(top) if p["title"] == title)
    assert top[start]["type"] == "row"
    after = top[start + 1 :]
    end = next((i for i, p in enumerate(after) if p["type"] == "row"), len(after))
    return after[:end]


def test_the_judge_row_shows_live_accuracy_agreement_and_drift(dashboard: Dashboard) -> None:
    """Live sensitivity, specificity and precision with their bounds, labelled answers,
    reviewer kappa, claim agreement, drift and label outcomes: each read in the row, each
    a metric the worker exposes."""
    row = _judge_panels(dashboard)
    read = set().union(*(metric_names(t["expr"]) for p in row for t in p["targets"]))
    figures = {
        f"streamproc_judge_live_{figure}{bound}"
        for figure in ("sensitivity", "specificity", "precision")
        for bound in ("", "_low", "_high")
    }
    wanted = figures | {
        "streamproc_judge_labelled_answers",
        "streamproc_judge_reviewer_kappa",
        "streamproc_judge_claim_agreement",
        "streamproc_judge_drift",
        "streamproc_labels_total",
    }
    assert read == wanted, read ^ wanted
    assert wanted <= contract_metrics()


def test_the_judge_band_fills_between_each_figures_bounds(dashboard: Dashboard) -> None:
    (band,) = [p for p in _judge_panels(dashboard) if p.get("repeat") == "assistant"]
    legends = {t["legendFormat"]: t["expr"] for t in band["targets"]}
    fills = {
        o["matcher"]["options"]: prop["value"]
        for o in band["fieldConfig"]["overrides"]
        for prop in o["properties"]
        if prop["id"] == "custom.fillBelowTo"
    }
    figures = ("sensitivity", "specificity", "precision")
    assert fills == {f"{f} high": f"{f} low" for f in figures}
    for figure in figures:
        assert f"streamproc_judge_live_{figure}_low{{" in legends[f"{figure} low"]
        assert f"streamproc_judge_live_{figure}_high{{" in legends[f"{figure} high"]
    # one cell per band: every series names the tenant, assistant, task type and judge
    for expr in legends.values():
        for label in ("tenant", "assistant", "task_type", "judge"):
            assert f'{label}="${label}"' in expr


def test_the_gate_row_reads_every_gate_metric_and_splits_unverified_by_reason(
    dashboard: Dashboard,
) -> None:
    """The gate's alerts send on-call to this row for the reasons of unverified decisions:
    every gate metric is read there, and one panel groups the unverified ones by reason."""
    row = _row_panels(dashboard, "Gate")
    exprs = [t["expr"] for p in row for t in p["targets"]]
    read = set().union(*(metric_names(e) for e in exprs))
    gate_metrics = {m for m in contract_metrics() if m.startswith("streamproc_gate_")}
    families = {re.sub(r"_(bucket|count|sum)$", "", m) for m in read}
    assert families >= {re.sub(r"_(bucket|count|sum)$", "", m) for m in gate_metrics}
    assert any('verified="false"' in e and re.search(r"by \([^)]*\breason\b", e) for e in exprs), (
        exprs
    )
