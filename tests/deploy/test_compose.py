"""docker-compose.yml and every config it mounts are checked statically: no engine runs in CI.

What would break ``docker compose up`` or a process at start-up is checked here: unpinned images,
missing build files, mounted configs or secret files, settings that ``Settings`` rejects or that
point at a broker listener Kafka does not advertise, a store URL that does not reach the
PostgreSQL service, a reviewers' or gate callers' tokens file that is not a mounted secret (or
whose dev token lets nobody in), a healthcheck of a port or path the command does not serve, a
port published beyond localhost or to nobody, a process whose /metrics Prometheus does not
scrape, a collector pipeline wired to an undefined component, an unescaped ``$`` that compose
would interpolate, and dependencies that do not wait for health. Each checker that returns
problems is also shown a broken copy and must name the break.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from base64 import urlsafe_b64decode
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from sqlalchemy.engine import make_url

from streamproc.config import Settings
from streamproc.gate.http.auth import Callers
from streamproc.monitor.options import AlertSettings
from streamproc.review.page.auth import Reviewers, TokensFileError
from tests.deploy.health import health_endpoint
from tests.deploy.test_settings import is_command, settings_from_env

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


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(loaded, dict), "docker-compose.yml is not a mapping"
    return cast(dict[str, Any], loaded)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Service]:
    found = compose.get("services")
    assert isinstance(found, dict) and found, "no services"
    return cast(dict[str, Service], found)


@pytest.fixture(scope="module")
def collector_config(services: dict[str, Service]) -> dict[str, Any]:
    return _collector_config(services["otel-collector"])


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


def test_every_image_is_pinned(services: dict[str, Service]) -> None:
    for name, service in services.items():
        image = service.get("image")
        if image is None:
            assert "build" in service, f"{name}: neither image nor build"
            continue
        if "@sha256:" in image:
            continue
        _, sep, tag = image.rpartition(":")
        assert sep and "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag != "latest", f"{name}: image {image!r} uses latest"
        assert re.search(r"\d+\.\d+", tag), f"{name}: {image!r} names no release"


def test_build_contexts_exist(services: dict[str, Service]) -> None:
    builds = {name: s["build"] for name, s in services.items() if "build" in s}
    assert builds, "nothing is built"
    for name, build in builds.items():
        spec = {"context": build} if isinstance(build, str) else build
        context = (REPO / spec.get("context", ".")).resolve()
        assert context.is_dir(), f"{name}: missing build context {context}"
        dockerfile = context / spec.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: missing {dockerfile}"
        assert (context / ".dockerignore").is_file(), f"{name}: no .dockerignore"
        text = dockerfile.read_text()
        assert 'ENTRYPOINT ["streamproc"]' in text
        assert "\nUSER " in text, f"{name}: image runs as root"


def test_services_that_share_the_image_build_it(services: dict[str, Service]) -> None:
    """A service naming the image without building it would make compose pull a local tag."""
    ours = _streamproc_services(services)
    assert {"worker", "audit-sink", "review", "gate"} <= set(ours)
    assert all("build" in s for s in ours.values())
    assert len({json.dumps(s["build"], sort_keys=True) for s in ours.values()}) == 1


def test_mounted_repo_files_exist(compose: dict[str, Any]) -> None:
    assert not missing_files(compose)
    broken = copy.deepcopy(compose)
    broken["services"]["otel-collector"]["volumes"] = ["./deploy/otel.yaml:/etc/c.yaml:ro"]
    broken["secrets"]["postgres_password"]["file"] = "./deploy/postgres/nope.txt"
    broken["secrets"][TOKENS_SECRET]["file"] = "./deploy/review/tokens.toml"
    broken["secrets"][GATE_TOKENS_SECRET]["file"] = "./deploy/gate/tokens.toml"
    assert missing_files(broken) == [
        "otel-collector: mounts missing ./deploy/otel.yaml",
        "secret postgres_password: missing ./deploy/postgres/nope.txt",
        f"secret {TOKENS_SECRET}: missing ./deploy/review/tokens.toml",
        f"secret {GATE_TOKENS_SECRET}: missing ./deploy/gate/tokens.toml",
    ]


def test_nothing_is_interpolated(compose: dict[str, Any]) -> None:
    assert not interpolation_problems(compose)
    broken = copy.deepcopy(compose)
    # A copy: the sink shares its entrypoint (a YAML alias) with the review page.
    entrypoint = list(broken["services"]["audit-sink"]["entrypoint"])
    entrypoint[2] = entrypoint[2].replace("$$(cat", "$(cat")
    broken["services"]["audit-sink"]["entrypoint"] = entrypoint
    assert interpolation_problems(broken) == [f"'$(' in {entrypoint[2]!r}"]


def test_streamproc_settings_are_accepted(services: dict[str, Service]) -> None:
    for name, service in _streamproc_services(services).items():
        ours = _env(service)
        for required in (
            "STREAMPROC_BROKER_URL",
            "STREAMPROC_TOPICS__PARTITIONS",
            "STREAMPROC_LOG_JSON",
            "STREAMPROC_WORKER__HEALTH_PORT",
            "STREAMPROC_TELEMETRY__EXPORTER",
        ):
            assert required in ours, f"{name} lacks {required}"
        settings = _settings(service)
        assert settings.broker_flavour == "kafka"
        host, _, port = settings.bootstrap_servers.partition(":")
        kafka = services.get(host)
        assert kafka is not None, f"{name}: broker host {host!r} is not a compose service"
        assert (host, int(port)) in _advertised(kafka), f"{name}: unadvertised listener"
        assert not any(key.startswith("OTEL_") for key in ours), "Settings owns telemetry"


def test_commands_are_streamproc_commands(services: dict[str, Service]) -> None:
    for name, service in _streamproc_services(services).items():
        assert is_command(service["command"]), f"{name}: streamproc {service['command']}"


def test_one_partition_count_everywhere(services: dict[str, Service]) -> None:
    counts = {_settings(s).topics.partitions for s in _streamproc_services(services).values()}
    assert len(counts) == 1, "the worker and the sink disagree on the topics' size"


def test_healthchecks_hit_the_health_port(services: dict[str, Service]) -> None:
    """Commands that serve a health URL are checked there; the others have no healthcheck,
    which would only mark them unhealthy for good."""
    assert not healthcheck_problems(services)
    checked = {n for n, s in _streamproc_services(services).items() if "healthcheck" in s}
    assert {"worker", "review", "gate"} <= checked


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s["review"]["healthcheck"].update(test=s["worker"]["healthcheck"]["test"]),
            [
                "review: healthcheck port 8081 is not where it serves",
                "review: healthcheck asks /livez, not /healthz",
            ],
        ),
        (
            lambda s: s["audit-sink"].update(healthcheck=s["review"]["healthcheck"]),
            ["audit-sink: audit-sink serves no health URL"],
        ),
        (lambda s: s["review"].pop("healthcheck"), ["review: no healthcheck"]),
        (
            lambda s: s["gate"].update(healthcheck=s["review"]["healthcheck"]),
            ["gate: healthcheck port 8780 is not where it serves"],
        ),
        (
            lambda s: s["gate"]["environment"].update(STREAMPROC_GATE__PORT="8791"),
            ["gate: healthcheck port 8790 is not where it serves"],
        ),
        (
            lambda s: s["gate"]["healthcheck"].update(
                test=[a.replace("/healthz", "/livez") for a in s["gate"]["healthcheck"]["test"]]
            ),
            ["gate: healthcheck asks /livez, not /healthz"],
        ),
        (lambda s: s["gate"].pop("healthcheck"), ["gate: no healthcheck"]),
    ],
    ids=[
        "worker's check on the page",
        "check on the sink",
        "page unchecked",
        "page's check on the gate",
        "gate moved",
        "gate's check asks /livez",
        "gate unchecked",
    ],
)
def test_healthcheck_checker_names_a_bad_check(
    services: dict[str, Service], mutate: Any, expected: list[str]
) -> None:
    broken = copy.deepcopy(services)
    mutate(broken)
    assert healthcheck_problems(broken) == expected


def test_workers_wait_for_a_healthy_kafka(services: dict[str, Service]) -> None:
    assert services["kafka"]["healthcheck"]["test"], "kafka has no healthcheck"
    for name, service in _streamproc_services(services).items():
        depends = service.get("depends_on")
        assert isinstance(depends, dict), f"{name}: depends_on needs the long form"
        assert depends["kafka"]["condition"] == "service_healthy"
        for dependency, spec in depends.items():
            assert dependency in services
            assert "condition" in spec


def test_worker_runs_replicated_and_restarts(services: dict[str, Service]) -> None:
    for name, service in _streamproc_services(services).items():
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}
        assert "container_name" not in service, f"{name}: a fixed name cannot be replicated"
        replicas = service.get("deploy", {}).get("replicas", 1)
        partitions = _settings(service).topics.partitions
        assert replicas <= partitions, f"{name}: some replicas would get no partition"
    assert services["worker"]["deploy"]["replicas"] >= 2


def test_kafka_runs_kraft_single_node(services: dict[str, Service]) -> None:
    env = _env(services["kafka"])
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", "the worker creates topics"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[key] == "1"
    cluster_id = env["CLUSTER_ID"]
    assert len(urlsafe_b64decode(cluster_id + "=" * (-len(cluster_id) % 4))) == 16


def test_audit_sink_stores_into_the_postgres_service(services: dict[str, Service]) -> None:
    sink = services["audit-sink"]
    assert sink["command"] == ["audit-sink"]
    url = make_url(_settings(sink).audit.store_url)
    assert url.drivername == "postgresql+psycopg"
    assert url.host in services and services[url.host]["image"].startswith("postgres:")
    postgres = _env(services[url.host])
    assert url.username == postgres["POSTGRES_USER"]
    assert url.database == postgres["POSTGRES_DB"]
    assert url.port in (None, 5432)
    assert url.password is None, "the password comes from the secret, not the URL"
    assert sink["depends_on"][url.host]["condition"] == "service_healthy"


def test_the_worker_is_not_given_the_store(services: dict[str, Service]) -> None:
    worker = services["worker"]
    assert "STREAMPROC_AUDIT__STORE_URL" not in _env(worker)
    assert "STREAMPROC_REVIEW__STORE_URL" not in _env(worker)
    assert _service_secrets(worker) == [TOKENS_SECRET], "only the reviewers' tokens"


def test_postgres_is_persistent_checked_and_reads_its_password_from_a_secret(
    compose: dict[str, Any], services: dict[str, Service]
) -> None:
    postgres = services["postgres"]
    env = _env(postgres)
    assert "POSTGRES_PASSWORD" not in env, "the password belongs in the secret file"
    password_file = env["POSTGRES_PASSWORD_FILE"]
    assert password_file.startswith(SECRETS_DIR)
    assert password_file.removeprefix(SECRETS_DIR) in _service_secrets(postgres)

    volumes = [v for v in postgres["volumes"] if isinstance(v, str)]
    named = {v.split(":")[0] for v in volumes if v.split(":")[1] == "/var/lib/postgresql/data"}
    assert named and named <= set(compose["volumes"]), "the data directory is not a volume"

    test = postgres["healthcheck"]["test"]
    assert test[:2] == ["CMD", "pg_isready"]
    options = dict(arg.removeprefix("--").split("=", 1) for arg in test[2:])
    assert options == {
        "host": "127.0.0.1",  # TCP: the socket answers during first-time initialisation
        "username": env["POSTGRES_USER"],
        "dbname": env["POSTGRES_DB"],
    }


def test_secrets_are_declared_and_dev_only(
    compose: dict[str, Any], services: dict[str, Service]
) -> None:
    declared = set(compose.get("secrets") or {})
    for name, service in services.items():
        assert set(_service_secrets(service)) <= declared, f"{name}: undeclared secret"
    password = _secret_path(compose, "postgres_password").read_text().strip()
    assert "dev" in password, "the committed password must say it is for development only"
    for name, service in _streamproc_services(services).items():
        assert all(password not in value for value in _env(service).values()), name
    for secret in (TOKENS_SECRET, GATE_TOKENS_SECRET):
        tokens = _secret_path(compose, secret).read_text()
        assert "dev only" in tokens, f"the committed {secret} must say it is for development only"


@pytest.mark.parametrize("name", ["audit-sink", "review"])
def test_store_entrypoints_export_the_secret_as_pgpassword(
    compose: dict[str, Any], services: dict[str, Service], tmp_path: Path, name: str
) -> None:
    """Runs the entrypoint of a service with a store as the container would (after compose
    turns ``$$`` into ``$``), with the secret's file where compose would mount it and a
    stand-in streamproc."""
    sink = services[name]
    argv = [arg.replace("$$", "$") for arg in [*sink["entrypoint"], *sink["command"]]]
    assert argv[:2] == ["/bin/sh", "-c"]
    secret = "postgres_password"
    assert secret in _service_secrets(sink)
    script = argv[2].replace(SECRETS_DIR + secret, str(_secret_path(compose, secret)))
    assert script != argv[2], "the entrypoint does not read the secret it mounts"

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "streamproc"
    stand_in.write_text('#!/bin/sh\nprintf "%s\\n" "$PGPASSWORD" "$@"\n')
    stand_in.chmod(0o755)
    result = subprocess.run(
        ["/bin/sh", "-c", script, *argv[3:]],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    password = _secret_path(compose, secret).read_text().strip()
    assert result.stdout.splitlines() == [password, *sink["command"]], shlex.join(argv)


def test_review_page_keeps_its_queue_in_the_postgres_service(
    services: dict[str, Service],
) -> None:
    """The audit store's server and database (tables review_* beside audit_*), reached
    with the same user and the password from the same secret, never in the URL."""
    page = services["review"]
    url = make_url(_settings(page).review.store_url)
    assert url.drivername == "postgresql+psycopg"
    assert url.host in services and services[url.host]["image"].startswith("postgres:")
    postgres = _env(services[url.host])
    assert (url.username, url.database) == (postgres["POSTGRES_USER"], postgres["POSTGRES_DB"])
    assert url.port in (None, 5432)
    assert url.password is None, "the password comes from the secret, not the URL"
    assert page["depends_on"][url.host]["condition"] == "service_healthy"
    assert page["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_review_page_is_published_on_localhost_and_runs_once(
    services: dict[str, Service],
) -> None:
    page = services["review"]
    assert page["command"] == ["review", "serve"]
    settings = _settings(page).review
    assert settings.host == "0.0.0.0", "bound to 127.0.0.1, the published port reaches nobody"
    assert page["ports"] == [f"127.0.0.1:{settings.port}:{settings.port}"]
    # Sessions are signed with a key each replica draws at start-up.
    assert page["deploy"]["replicas"] == 1


def test_the_page_and_the_workers_read_the_reviewers_tokens(
    compose: dict[str, Any], services: dict[str, Service]
) -> None:
    assert not tokens_file_problems(compose)
    for name in ("worker", "review"):
        assert _settings(services[name]).review.tokens_file is not None, name
    reviewers = Reviewers.load(_secret_path(compose, TOKENS_SECRET))
    signed_in = reviewers.authenticate(DEV_TOKEN)
    assert signed_in is not None, "the dev token in deploy/review/README.md signs nobody in"
    assert signed_in.may_see("demo"), "the sample traffic's tenant"
    assert DEV_TOKEN in (REPO / "deploy" / "review" / "README.md").read_text()


def test_tokens_file_checker_names_a_bad_mount(compose: dict[str, Any], tmp_path: Path) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["worker"]["secrets"] = []
    broken["services"]["review"]["environment"]["STREAMPROC_REVIEW__TOKENS_FILE"] = "/t.toml"
    not_toml = tmp_path / "tokens.toml"
    not_toml.write_text("[[reviewer]\n")
    broken["secrets"][TOKENS_SECRET]["file"] = str(not_toml)
    broken["services"]["audit-sink"]["environment"]["STREAMPROC_REVIEW__TOKENS_FILE"] = (
        SECRETS_DIR + TOKENS_SECRET
    )
    broken["services"]["audit-sink"]["secrets"] = ["postgres_password", TOKENS_SECRET]
    worker, sink, page = tokens_file_problems(broken)
    assert worker == f"worker: tokens file {SECRETS_DIR}{TOKENS_SECRET} is not a secret it mounts"
    assert sink.startswith(f"audit-sink: tokens file {SECRETS_DIR}{TOKENS_SECRET}: ")
    assert f"the tokens file {not_toml} is not TOML" in sink
    assert page == "review: tokens file /t.toml is not a secret it mounts"


def test_the_gate_reads_its_callers_tokens_from_a_secret(
    compose: dict[str, Any], services: dict[str, Service]
) -> None:
    assert not gate_tokens_problems(compose)
    gate = services["gate"]
    assert _service_secrets(gate) == [GATE_TOKENS_SECRET], "only the callers' tokens"
    assert _settings(gate).gate.tokens_file == Path(SECRETS_DIR + GATE_TOKENS_SECRET)
    assert not gate_dev_token_problems(
        _secret_path(compose, GATE_TOKENS_SECRET), GATE_README, GATE_DEV_TOKEN
    )


def test_gate_tokens_checker_names_a_bad_mount(compose: dict[str, Any], tmp_path: Path) -> None:
    unmounted = copy.deepcopy(compose)
    unmounted["services"]["gate"]["secrets"] = []
    assert gate_tokens_problems(unmounted) == [
        f"gate: tokens file {SECRETS_DIR}{GATE_TOKENS_SECRET} is not a secret it mounts"
    ]
    unset = copy.deepcopy(compose)
    del unset["services"]["gate"]["environment"]["STREAMPROC_GATE__TOKENS_FILE"]
    assert gate_tokens_problems(unset) == ["gate: no gate tokens file, every request is refused"]
    # The reviewers' file is TOML of the same shape, but [[reviewer]], not [[caller]].
    reviewers = copy.deepcopy(compose)
    reviewers["secrets"][GATE_TOKENS_SECRET] = reviewers["secrets"][TOKENS_SECRET]
    (problem,) = gate_tokens_problems(reviewers)
    assert problem.startswith(f"gate: tokens file {SECRETS_DIR}{GATE_TOKENS_SECRET}: ")
    assert "unknown tables ['reviewer'] (expected [[caller]])" in problem
    not_toml = tmp_path / "tokens.toml"
    not_toml.write_text("[[caller]\n")
    broken = copy.deepcopy(compose)
    broken["secrets"][GATE_TOKENS_SECRET]["file"] = str(not_toml)
    (problem,) = gate_tokens_problems(broken)
    assert f"the tokens file {not_toml} is not TOML" in problem


def test_gate_dev_token_checker_names_a_token_that_lets_nobody_in(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    tokens_file = _secret_path(compose, GATE_TOKENS_SECRET)
    readme = tmp_path / "README.md"
    readme.write_text(GATE_README.read_text().replace(GATE_DEV_TOKEN, "streamproc-dev-token"))
    assert gate_dev_token_problems(tokens_file, readme, GATE_DEV_TOKEN) == [
        "README.md does not give the dev token"
    ]
    assert gate_dev_token_problems(tokens_file, GATE_README, DEV_TOKEN) == [
        "README.md does not give the dev token",
        f"the dev token authenticates nobody in {tokens_file.name}",
    ]
    other_tenant = tmp_path / "dev-tokens.toml"
    other_tenant.write_text(tokens_file.read_text().replace('["demo"]', '["acme"]'))
    assert gate_dev_token_problems(other_tenant, GATE_README, GATE_DEV_TOKEN) == [
        "dev-caller may not check the tenant 'demo'"
    ]


def test_the_gate_is_published_on_localhost_where_it_serves(services: dict[str, Service]) -> None:
    assert not published_port_problems(services)
    gate = services["gate"]
    assert gate["command"] == ["gate", "serve"]
    settings = _settings(gate).gate
    assert settings.host == "0.0.0.0", "bound to 127.0.0.1, the published port reaches nobody"
    assert gate["ports"] == [f"127.0.0.1:{settings.port}:{settings.port}"]
    assert settings.publish, "verdicts, outcomes and audit records go to Kafka, as the worker's"
    assert gate["deploy"]["replicas"] == 1, "a fixed host port is bound once"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s["gate"].update(ports=["8790:8790"]),
            ["gate: 8790:8790 is published beyond localhost"],
        ),
        (
            lambda s: s["gate"].update(ports=["0.0.0.0:8790:8790"]),
            ["gate: 0.0.0.0:8790:8790 is published beyond localhost"],
        ),
        (
            lambda s: s["gate"]["environment"].pop("STREAMPROC_GATE__HOST"),
            ["gate: binds 127.0.0.1, its port reaches nobody"],
        ),
        (
            lambda s: s["gate"].update(ports=["127.0.0.1:8790:9464"]),
            ["gate: publishes 9464, serves on 8790"],
        ),
        (
            lambda s: s["review"]["environment"].update(STREAMPROC_REVIEW__HOST="127.0.0.1"),
            ["review: binds 127.0.0.1, its port reaches nobody"],
        ),
    ],
    ids=[
        "gate on all host interfaces",
        "gate on 0.0.0.0",
        "gate on loopback",
        "gate's metrics port published",
        "page on loopback",
    ],
)
def test_published_port_checker_names_a_bad_port(
    services: dict[str, Service], mutate: Any, expected: list[str]
) -> None:
    broken = copy.deepcopy(services)
    mutate(broken)
    assert published_port_problems(broken) == expected


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


def _compose_schema() -> Mapping[str, Any] | None:
    """The compose-spec JSON schema as vendored by check-jsonschema, if installed.

    Located through package metadata rather than imported: only the data file is needed.
    """
    try:
        dist = metadata.distribution("check-jsonschema")
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file("check_jsonschema/builtin_schemas/vendor/compose-spec.json")))
    if not path.is_file():
        return None
    return cast(Mapping[str, Any], json.loads(path.read_text()))


def test_matches_compose_spec_schema(compose: dict[str, Any]) -> None:
    schema = _compose_schema()
    if schema is None:
        pytest.skip("check-jsonschema (which ships the compose-spec schema) is not installed")
    # The file names draft-07 without the trailing '#', which jsonschema does not resolve.
    validator = jsonschema.Draft7Validator(schema)
    validator.validate(compose)
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["healthcheck"]["command"] = "pg_isready"
    broken["services"]["worker"]["deploy"]["replica"] = 2
    broken["services"]["review"]["secret"] = [TOKENS_SECRET]  # for "secrets"
    assert len(list(validator.iter_errors(broken))) == 3


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


def test_the_image_is_built_from_the_wheel_users_install() -> None:
    """Two stages on a pinned base: the wheel (with the default judge's models, so
    models/ goes into the build stage and nothing points the image elsewhere), then only
    that wheel, no build tools, a non-root user."""
    text = (REPO / "deploy" / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, flags=re.MULTILINE)
    assert len(bases) == 2 and all(re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", b) for b in bases)
    build, final = text.split("\nFROM ", 2)[1:]
    assert "COPY models ./models" in build and "pip wheel" in build
    assert "COPY --from=build /wheels" in final and "MODELS_DIR" not in final
    assert not re.search(r"apt-get|gcc|build-essential", final)
    assert re.search(r"^USER (?!root)\S+", final, flags=re.MULTILINE)
