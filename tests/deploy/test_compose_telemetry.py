"""docker-compose.yml, what the stack tells its operators: telemetry reaching the collector,
collector pipelines wired, traces reaching Jaeger, Prometheus scraping every process that
serves /metrics and evaluating the generated rules, alerts reaching Alertmanager, and
Grafana provisioned from deploy/. Each checker is also shown a broken copy and must name
the break."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import yaml

from streamproc.monitor.options import AlertSettings
from tests.deploy.compose_stack import (
    REPO,
    Service,
    _bind_source,
    _env,
    _settings,
    _streamproc_services,
    collector_problems,
    missing_files,
    scrape_problems,
)


def test_telemetry_reaches_the_collector(
    services: dict[str, Service], collector_config: dict[str, Any]
) -> None:
    collector = services["otel-collector"]
    assert collector["image"].startswith("otel/opentelemetry-collector-contrib:")
    grpc = collector_config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    for name, service in _streamproc_services(services).items():
        telemetry = _settings(service).telemetry
        assert telemetry.exporter == "otlp-grpc", name
        assert telemetry.endpoint is not None
        endpoint = urlsplit(telemetry.endpoint)
        assert services.get(endpoint.hostname or "") is collector, f"{name}: not the collector"
        assert grpc.rsplit(":", 1)[1] == str(endpoint.port), f"{name}: collector listens elsewhere"
    assert grpc.startswith("0.0.0.0:"), "a localhost receiver is unreachable from other containers"


def test_collector_pipelines_are_wired(collector_config: dict[str, Any]) -> None:
    assert not collector_problems(collector_config)
    pipelines = collector_config["service"]["pipelines"]
    assert {"traces", "logs"} <= set(pipelines)
    assert pipelines["logs"]["exporters"] == ["debug"]
    protocols = collector_config["receivers"]["otlp"]["protocols"]
    assert {"grpc", "http"} <= set(protocols), "OTLP over gRPC and HTTP"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["service"]["pipelines"]["traces"].update(exporters=["otlp/tempo"]),
            [
                "pipeline traces: exporter otlp/tempo undefined",
                "exporter otlp/jaeger is in no pipeline",
            ],
        ),
        (
            lambda c: c["service"]["pipelines"]["traces"].update(processors=["batch", "attr"]),
            ["pipeline traces: processor attr undefined"],
        ),
        (lambda c: c["service"]["pipelines"].update(spans={}), None),
        (lambda c: c["service"].update(extensions=["pprof"]), ["extension pprof undefined"]),
    ],
)
def test_collector_checker_names_a_bad_wiring(
    collector_config: dict[str, Any], mutate: Any, expected: list[str] | None
) -> None:
    broken = copy.deepcopy(collector_config)
    mutate(broken)
    problems = collector_problems(broken)
    if expected is None:
        assert "pipeline spans: unknown signal" in problems
    else:
        assert sorted(problems) == sorted(expected)


def test_traces_reach_jaeger(
    services: dict[str, Service], collector_config: dict[str, Any]
) -> None:
    pipeline = collector_config["service"]["pipelines"]["traces"]
    hosts = {
        urlsplit("//" + collector_config["exporters"][name]["endpoint"]).hostname
        for name in pipeline["exporters"]
    }
    assert hosts == {"jaeger"}
    jaeger = services["jaeger"]
    assert jaeger["image"].startswith("jaegertracing/jaeger:2.")
    assert _env(jaeger)["JAEGER_LISTEN_HOST"] == "0.0.0.0", "OTLP must listen beyond localhost"
    assert collector_config["exporters"]["otlp/jaeger"]["endpoint"].endswith(":4317")


# ------------------------------------------------------------------ metrics and alerting

PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def _mounted(service: Service, container_path: str) -> Path | None:
    """The repository path a service sees at ``container_path`` through its bind mounts."""
    for volume in service.get("volumes", []):
        source = _bind_source(volume)
        if not source.startswith("."):
            continue  # a named volume
        target = (
            str(volume["target"]) if isinstance(volume, Mapping) else volume.split(":")[1]
        ).rstrip("/")
        if container_path == target or container_path.startswith(target + "/"):
            return REPO / source / container_path[len(target) :].lstrip("/")
    return None


def _flag(service: Service, name: str) -> str:
    (value,) = [arg.split("=", 1)[1] for arg in service["command"] if arg.startswith(f"{name}=")]
    return str(value)


def _prometheus_config(services: dict[str, Service]) -> dict[str, Any]:
    path = _mounted(services["prometheus"], _flag(services["prometheus"], "--config.file"))
    assert path is not None and path.is_file(), "prometheus.yml is not mounted from the repo"
    return cast(dict[str, Any], yaml.safe_load(path.read_text()))


def _seconds(duration: str) -> int:
    return sum(
        int(n) * _DURATION_UNITS[unit] for n, unit in re.findall(r"(\d+)([smhdwy])", duration)
    )


def test_prometheus_scrapes_every_worker_where_it_serves_metrics(
    services: dict[str, Service],
) -> None:
    config = _prometheus_config(services)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "streamproc-worker"]
    (discovery,) = job["dns_sd_configs"]
    assert discovery["type"] == "A", "one A record per replica"
    (name,) = discovery["names"]
    worker = services[name]
    assert worker["command"] == ["worker"]
    metrics = _settings(worker).metrics
    assert metrics.host == "0.0.0.0", "a worker bound to 127.0.0.1 cannot be scraped"
    assert metrics.port == discovery["port"] != 0
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_prometheus_scrapes_every_process_that_serves_metrics(
    services: dict[str, Service],
) -> None:
    config = _prometheus_config(services)
    assert not scrape_problems(config, services)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "streamproc-gate"]
    (discovery,) = job["dns_sd_configs"]
    assert discovery["names"] == ["gate"] and discovery["type"] == "A"
    assert job.get("metrics_path", "/metrics") == "/metrics"


def _job(config: dict[str, Any], name: str) -> dict[str, Any]:
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == name]
    return cast(dict[str, Any], job)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c, s: c["scrape_configs"].remove(_job(c, "streamproc-gate")),
            ["gate: no job scrapes it"],
        ),
        (
            lambda c, s: _job(c, "streamproc-gate")["dns_sd_configs"][0].update(port=8790),
            ["gate: scraped on [8790], serves 9464"],
        ),
        (
            lambda c, s: s["gate"]["environment"].pop("STREAMPROC_METRICS__HOST"),
            ["gate: /metrics bound to 127.0.0.1 cannot be scraped"],
        ),
        (
            lambda c, s: s["gate"]["environment"].pop("STREAMPROC_METRICS__PORT"),
            ["gate: serves no /metrics (STREAMPROC_METRICS__PORT)"],
        ),
        (
            lambda c, s: _job(c, "streamproc-gate")["dns_sd_configs"][0].update(names=["review"]),
            ["review: scraped, but review serve serves no /metrics", "gate: no job scrapes it"],
        ),
    ],
    ids=[
        "gate unscraped",
        "gate's http port scraped",
        "gate on loopback",
        "gate without metrics",
        "page scraped",
    ],
)
def test_scrape_checker_names_a_bad_target(
    services: dict[str, Service], mutate: Any, expected: list[str]
) -> None:
    config = copy.deepcopy(_prometheus_config(services))
    broken = copy.deepcopy(services)
    mutate(config, broken)
    assert sorted(scrape_problems(config, broken)) == sorted(expected)


def test_prometheus_evaluates_the_generated_rules(services: dict[str, Service]) -> None:
    prometheus = services["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:v3.")
    found: set[str] = set()
    for pattern in _prometheus_config(services)["rule_files"]:
        directory, _, glob = pattern.rpartition("/")
        local = _mounted(prometheus, directory)
        assert local is not None and local.is_dir(), f"{pattern}: not mounted from the repo"
        found |= {path.name for path in local.glob(glob)}
    assert "streamproc-slo.rules.yml" in found
    longest = max(p.long_s for p in [*AlertSettings().page, *AlertSettings().ticket])
    retention = _seconds(_flag(prometheus, "--storage.tsdb.retention.time"))
    assert retention > longest, "Prometheus would forget what the longest window reads"
    data = _flag(prometheus, "--storage.tsdb.path")
    assert any(
        isinstance(v, str) and v.split(":")[1] == data and not v.startswith(".")
        for v in prometheus["volumes"]
    ), "the TSDB is not on a named volume"


def test_prometheus_alerts_reach_alertmanager(services: dict[str, Service]) -> None:
    config = _prometheus_config(services)
    (manager,) = config["alerting"]["alertmanagers"]
    (targets,) = [c["targets"] for c in manager["static_configs"]]
    hosts = {urlsplit("//" + target).hostname for target in targets}
    ports = {urlsplit("//" + target).port for target in targets}
    assert hosts == {"alertmanager"} and ports == {ALERTMANAGER_PORT}
    alertmanager = services["alertmanager"]
    assert alertmanager["image"].startswith("prom/alertmanager:v0.")
    assert not any(a.startswith("--web.listen-address") for a in alertmanager["command"])
    config_path = _mounted(alertmanager, _flag(alertmanager, "--config.file"))
    assert config_path == REPO / "deploy/alertmanager/alertmanager.yml"


def test_grafana_is_provisioned_from_deploy(services: dict[str, Service]) -> None:
    grafana = services["grafana"]
    assert grafana["image"].startswith("grafana/grafana:")
    provisioning = _mounted(grafana, "/etc/grafana/provisioning")
    assert provisioning == REPO / "deploy/grafana/provisioning"
    for provider_file in (provisioning / "dashboards").glob("*.yml"):
        for provider in yaml.safe_load(provider_file.read_text())["providers"]:
            dashboards = _mounted(grafana, provider["options"]["path"])
            assert dashboards is not None and any(dashboards.glob("*.json")), provider["name"]
    home = _mounted(grafana, _env(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home is not None and home.is_file()
    for datasource_file in (provisioning / "datasources").glob("*.yml"):
        for datasource in yaml.safe_load(datasource_file.read_text())["datasources"]:
            url = urlsplit(datasource["url"])
            assert url.hostname == "prometheus" and url.port == PROMETHEUS_PORT
    assert grafana["depends_on"]["prometheus"]["condition"] == "service_started"


def test_monitoring_ports_are_published_on_localhost_only(services: dict[str, Service]) -> None:
    for name, port in (("prometheus", 9090), ("alertmanager", 9093), ("grafana", 3000)):
        assert services[name]["ports"] == [f"127.0.0.1:{port}:{port}"], name


def test_a_missing_monitoring_mount_is_named(compose: dict[str, Any]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["grafana"]["volumes"][1] = (
        "./deploy/grafana/boards:/etc/grafana/dashboards:ro"
    )
    broken["services"]["prometheus"]["volumes"][1] = (
        "./deploy/prometheus/rule:/etc/prometheus/rules:ro"
    )
    assert missing_files(broken) == [
        "prometheus: mounts missing ./deploy/prometheus/rule",
        "grafana: mounts missing ./deploy/grafana/boards",
    ]
