"""docker-compose.yml as the tests read it: the names it must use, readers of a service's
environment, settings, secrets and mounts, and the checkers that return the problems
that would break ``docker compose up`` or a process at start-up: missing files, bad
healthchecks, tokens files that are not mounted secrets (or whose dev token lets nobody
in), ports published beyond localhost or to nobody, processes Prometheus does not
scrape, unescaped ``$``, and collector pipelines wired to undefined components."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import yaml

from streamproc.config import Settings
from streamproc.gate.http.auth import Callers
from streamproc.review.page.auth import Reviewers, TokensFileError
from tests.deploy.health import health_endpoint
from tests.deploy.test_settings import settings_from_env

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
STREAMPROC_IMAGE = "streamproc-worker"
SECRETS_DIR = "/run/secrets/"
TOKENS_SECRET = "review_tokens"
DEV_TOKEN = "streamproc-dev-review-token-not-a-secret"  # deploy/review/README.md
GATE_TOKENS_SECRET = "gate_tokens"
GATE_DEV_TOKEN = "streamproc-dev-gate-token-not-a-secret"  # deploy/gate/README.md
GATE_README = REPO / "deploy" / "gate" / "README.md"
SAMPLE_TENANT = "demo"  # the sample traffic's
SERVES_METRICS = frozenset({("worker",), ("gate", "serve")})
"""streamproc commands that serve /metrics on ``metrics.port`` when it is set."""
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
PIPELINE_TYPES = {"traces", "metrics", "logs"}

Service = dict[str, Any]


def _env(service: Service) -> dict[str, str]:
    """A service's environment, from either the mapping or the ``KEY=VALUE`` list form."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) for item in raw)
        return {key: value for key, value in pairs}
    return {str(key): "" if value is None else str(value) for key, value in raw.items()}


def _advertised(kafka: Service) -> set[tuple[str, int]]:
    listeners = _env(kafka)["KAFKA_ADVERTISED_LISTENERS"].split(",")
    hosts = {urlsplit(listener.strip()) for listener in listeners}
    return {(url.hostname or "", url.port or 0) for url in hosts}


def _streamproc_services(services: dict[str, Service]) -> dict[str, Service]:
    """The services that run the streamproc image (workers, the audit sink, the review
    page, the gate)."""
    return {
        name: service
        for name, service in services.items()
        if str(service.get("image", "")).split(":")[0] == STREAMPROC_IMAGE
    }


def _settings(service: Service) -> Settings:
    return settings_from_env(_env(service))


def _service_secrets(service: Service) -> list[str]:
    """The names of the secrets a service mounts (short or long syntax)."""
    return [s if isinstance(s, str) else s["source"] for s in service.get("secrets", [])]


def _secret_path(compose: Mapping[str, Any], name: str) -> Path:
    return REPO / str(compose["secrets"][name]["file"])


def _bind_source(volume: str | Mapping[str, Any]) -> str:
    return str(volume.get("source", "")) if isinstance(volume, Mapping) else volume.split(":")[0]


def _collector_config(collector: Service) -> dict[str, Any]:
    mounts = [_bind_source(v) for v in collector["volumes"]]
    config_path = next(REPO / m for m in mounts if m.endswith((".yaml", ".yml")))
    return cast(dict[str, Any], yaml.safe_load(config_path.read_text()))


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def missing_files(compose: Mapping[str, Any]) -> list[str]:
    """Bind-mounted repo paths and secret files the stack names but the repo lacks."""
    missing: list[str] = []
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = _bind_source(volume)
            if source.startswith((".", "/")) and not (REPO / source).exists():
                missing.append(f"{name}: mounts missing {source}")
    for name, secret in (compose.get("secrets") or {}).items():
        if "file" in secret and not (REPO / secret["file"]).is_file():
            missing.append(f"secret {name}: missing {secret['file']}")
    return missing


def healthcheck_problems(services: Mapping[str, Service]) -> list[str]:
    """Healthchecks that would mark a healthy service unhealthy: one on a command that
    serves no health endpoint, or one fetching another port or path than the command
    serves; a command that serves one and is not checked is named too."""
    problems: list[str] = []
    for name, service in _streamproc_services(dict(services)).items():
        endpoint = health_endpoint(service["command"])
        if endpoint is None:
            if "healthcheck" in service:
                problems.append(f"{name}: {' '.join(service['command'])} serves no health URL")
            continue
        if "healthcheck" not in service:
            problems.append(f"{name}: no healthcheck")
            continue
        probe = " ".join(service["healthcheck"]["test"])
        found = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", probe)
        if not found:
            problems.append(f"{name}: healthcheck fetches no local URL")
            continue
        settings = _settings(service)
        if int(found.group(1)) != endpoint.port(settings):
            problems.append(f"{name}: healthcheck port {found.group(1)} is not where it serves")
        if found.group(2) != endpoint.liveness:
            problems.append(f"{name}: healthcheck asks {found.group(2)}, not {endpoint.liveness}")
    return problems


def tokens_file_problems(compose: Mapping[str, Any]) -> list[str]:
    """Services whose ``STREAMPROC_REVIEW__TOKENS_FILE`` is not a secret they mount, or
    whose secret file the page could not load: the page would refuse to start, and the
    worker's labels loop would not start either."""
    problems: list[str] = []
    for name, service in _streamproc_services(compose["services"]).items():
        path = _settings(service).review.tokens_file
        if path is not None:
            problems += _secret_tokens_problems(compose, name, service, path, Reviewers.load)
    return problems


def gate_tokens_problems(compose: Mapping[str, Any]) -> list[str]:
    """Gates without a tokens file (they refuse every request, 401), and services whose
    ``STREAMPROC_GATE__TOKENS_FILE`` is not a secret they mount or not a callers' file the
    gate could load (``gate serve`` would exit at start-up)."""
    problems: list[str] = []
    for name, service in _streamproc_services(compose["services"]).items():
        path = _settings(service).gate.tokens_file
        if path is None:
            if service["command"] == ["gate", "serve"]:
                problems.append(f"{name}: no gate tokens file, every request is refused")
            continue
        problems += _secret_tokens_problems(compose, name, service, path, Callers.load)
    return problems


def _secret_tokens_problems(
    compose: Mapping[str, Any],
    name: str,
    service: Service,
    path: Path,
    load: Callable[[Path], object],
) -> list[str]:
    """Why the tokens file at ``path`` is not a mounted secret ``load`` accepts, if it is not."""
    secret = str(path).removeprefix(SECRETS_DIR)
    if not str(path).startswith(SECRETS_DIR) or secret not in _service_secrets(service):
        return [f"{name}: tokens file {path} is not a secret it mounts"]
    try:
        load(_secret_path(compose, secret))
    except (KeyError, TokensFileError) as error:
        return [f"{name}: tokens file {path}: {error}"]
    return []


def gate_dev_token_problems(tokens_file: Path, readme: Path, token: str) -> list[str]:
    """Why the dev token the README gives would not let a caller check the sample tenant's
    answers against the compose stack's gate tokens file."""
    problems: list[str] = []
    if token not in readme.read_text():
        problems.append(f"{readme.name} does not give the dev token")
    caller = Callers.load(tokens_file).authenticate(token)
    if caller is None:
        problems.append(f"the dev token authenticates nobody in {tokens_file.name}")
    elif not caller.may_see(SAMPLE_TENANT):
        problems.append(f"{caller.name} may not check the tenant {SAMPLE_TENANT!r}")
    return problems


def published_port_problems(services: Mapping[str, Service]) -> list[str]:
    """Ports published beyond the host's loopback interface, and streamproc servers whose
    published port reaches nobody: one bound to loopback inside its container, or one that
    publishes another port than it serves on."""
    problems: list[str] = []
    for name, service in services.items():
        for mapping in service.get("ports", []):
            if str(mapping).split(":")[0] not in LOOPBACK:
                problems.append(f"{name}: {mapping} is published beyond localhost")
    for name, service in _streamproc_services(dict(services)).items():
        endpoint = health_endpoint(service["command"])
        if endpoint is None or endpoint.host is None or not service.get("ports"):
            continue
        settings = _settings(service)
        if endpoint.host(settings) in LOOPBACK:
            problems.append(f"{name}: binds {endpoint.host(settings)}, its port reaches nobody")
        for mapping in service["ports"]:
            container_port = int(str(mapping).rsplit(":", 1)[1].split("/")[0])
            if container_port != endpoint.port(settings):
                problems.append(
                    f"{name}: publishes {container_port}, serves on {endpoint.port(settings)}"
                )
    return problems


def scrape_problems(
    prometheus_config: Mapping[str, Any], services: Mapping[str, Service]
) -> list[str]:
    """Processes serving /metrics that no compose job scrapes where they serve (or that
    bind it to loopback), and jobs scraping a command that serves none."""
    scraped: dict[str, set[int]] = {}
    for job in prometheus_config["scrape_configs"]:
        for discovery in job.get("dns_sd_configs", []):
            for host in discovery["names"]:
                scraped.setdefault(host, set()).add(int(discovery["port"]))
    problems: list[str] = []
    for name, service in _streamproc_services(dict(services)).items():
        command = tuple(service["command"])
        if command not in SERVES_METRICS:
            if name in scraped:
                problems.append(f"{name}: scraped, but {' '.join(command)} serves no /metrics")
            continue
        metrics = _settings(service).metrics
        if metrics.port is None:
            problems.append(f"{name}: serves no /metrics (STREAMPROC_METRICS__PORT)")
            continue
        if metrics.host in LOOPBACK:
            problems.append(f"{name}: /metrics bound to {metrics.host} cannot be scraped")
        if name not in scraped:
            problems.append(f"{name}: no job scrapes it")
        elif scraped[name] != {metrics.port}:
            problems.append(f"{name}: scraped on {sorted(scraped[name])}, serves {metrics.port}")
    return problems


def interpolation_problems(compose: Mapping[str, Any]) -> list[str]:
    """Values compose would interpolate: the stack needs no .env, so ``$`` must be ``$$``
    (a literal ``$`` for the shell) unless it is ``${NAME:-default}``."""
    problems: list[str] = []
    for text in _strings(compose):
        for match in re.finditer(r"\$(\$|\{[^}]*\}|.?)", text):
            token = match.group(0)
            if token == "$$" or re.fullmatch(r"\$\{\w+:?-[^}]*\}", token):
                continue
            problems.append(f"{token!r} in {text!r}")
    return problems


def collector_problems(config: Mapping[str, Any]) -> list[str]:
    """What the collector would refuse at start-up, or silently drop: a pipeline naming an
    undefined component or of an unknown signal, one with no receiver or exporter, an unused
    receiver or exporter, an undefined extension."""
    problems: list[str] = []
    service = config.get("service") or {}
    pipelines: Mapping[str, Any] = service.get("pipelines") or {}
    if not pipelines:
        problems.append("no pipelines")
    used: dict[str, set[str]] = {"receivers": set(), "exporters": set()}
    for pipeline_id, pipeline in pipelines.items():
        if pipeline_id.split("/")[0] not in PIPELINE_TYPES:
            problems.append(f"pipeline {pipeline_id}: unknown signal")
        for kind in ("receivers", "processors", "exporters"):
            listed = pipeline.get(kind) or []
            if kind != "processors" and not listed:
                problems.append(f"pipeline {pipeline_id}: no {kind}")
            for component in listed:
                if component not in (config.get(kind) or {}):
                    problems.append(f"pipeline {pipeline_id}: {kind[:-1]} {component} undefined")
                used.get(kind, set()).add(component)
    for kind, names in used.items():
        for unused in set(config.get(kind) or {}) - names:
            problems.append(f"{kind[:-1]} {unused} is in no pipeline")
    for extension in service.get("extensions") or []:
        if extension not in (config.get("extensions") or {}):
            problems.append(f"extension {extension} undefined")
    return problems
