"""deploy/alertmanager/alertmanager.yml: every severity the generated rules use reaches its
receiver, one notification per (tenant, assistant), a page holds back the ticket for the
same assistant. Checked structurally here, and by amtool where it is installed."""

from __future__ import annotations

import copy
import re
from typing import Any, cast

import pytest
import yaml

from streamproc.monitor.options import AlertSettings
from streamproc.monitor.prometheus_rules import GROUP_LABELS, rule_groups
from tests.deploy.monitoring import REPO, run_tool, tool_or_skip

CONFIG_FILE = REPO / "deploy/alertmanager/alertmanager.yml"
RECEIVER_OF = {"page": "pager", "ticket": "ticket"}
_MATCHER = re.compile(r'^\s*(\w+)\s*=\s*"([^"]*)"\s*$')


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.safe_load(CONFIG_FILE.read_text()))


def _severities() -> set[str]:
    rules = [r for g in rule_groups(AlertSettings())["groups"] for r in g["rules"]]
    return {r["labels"]["severity"] for r in rules if "alert" in r}


def _matches(route: dict[str, Any], labels: dict[str, str]) -> bool:
    for matcher in route.get("matchers", []):
        found = _MATCHER.match(matcher)
        assert found, f'only name="value" matchers are read here: {matcher!r}'
        if labels.get(found.group(1)) != found.group(2):
            return False
    return True


def receiver_for(route: dict[str, Any], labels: dict[str, str]) -> str:
    """Alertmanager's walk for an alert (first matching child, no ``continue``)."""
    for child in route.get("routes", []):
        if _matches(child, labels):
            return receiver_for({"receiver": route["receiver"], **child}, labels)
    return str(route["receiver"])


def routing_problems(config: dict[str, Any]) -> list[str]:
    """What would lose or duplicate a streamproc alert's notification."""
    problems: list[str] = []
    receivers = {r["name"] for r in config.get("receivers", [])}
    route = config["route"]
    for severity in sorted(_severities()):
        got = receiver_for(route, {"alertname": "x", "severity": severity})
        if got != RECEIVER_OF[severity]:
            problems.append(f"severity={severity} goes to {got}, not {RECEIVER_OF[severity]}")
        if got not in receivers:
            problems.append(f"receiver {got} is not defined")
    missing = set(GROUP_LABELS) - set(route.get("group_by", []))
    if missing:
        problems.append(f"not grouped by {', '.join(sorted(missing))}")
    inhibits = [
        rule
        for rule in config.get("inhibit_rules", [])
        if rule.get("source_matchers") == ['severity="page"']
        and rule.get("target_matchers") == ['severity="ticket"']
    ]
    if not inhibits:
        problems.append("a page does not inhibit the ticket")
    elif not set(GROUP_LABELS) <= set(inhibits[0].get("equal", [])):
        problems.append("a page inhibits tickets of other tenants or assistants")
    return problems


def test_severities_reach_their_receivers(config: dict[str, Any]) -> None:
    assert _severities() == set(RECEIVER_OF)
    assert not routing_problems(config)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (
            lambda c: c["route"]["routes"][0].update(matchers=['severity="critical"']),
            "severity=page goes to ticket, not pager",
        ),
        (lambda c: c["receivers"].pop(0), "receiver pager is not defined"),
        (lambda c: c["route"].update(group_by=["alertname"]), "not grouped by assistant, tenant"),
        (lambda c: c["inhibit_rules"][0].update(equal=["alertname"]), "other tenants"),
        (lambda c: c.pop("inhibit_rules"), "a page does not inhibit the ticket"),
    ],
)
def test_the_checker_names_a_broken_route(
    config: dict[str, Any], mutate: Any, problem: str
) -> None:
    broken = copy.deepcopy(config)
    mutate(broken)
    assert any(problem in p for p in routing_problems(broken)), routing_problems(broken)


def test_amtool_accepts_the_config() -> None:
    amtool = tool_or_skip("amtool")
    checked = run_tool(amtool, "check-config", CONFIG_FILE)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


@pytest.mark.parametrize("severity", sorted(RECEIVER_OF))
def test_amtool_routes_each_severity(severity: str) -> None:
    amtool = tool_or_skip("amtool")
    labels = [f"severity={severity}", "tenant=acme", "assistant=support"]
    routed = run_tool(amtool, "config", "routes", "test", f"--config.file={CONFIG_FILE}", *labels)
    assert routed.returncode == 0, routed.stdout + routed.stderr
    assert routed.stdout.split() == [RECEIVER_OF[severity]]
