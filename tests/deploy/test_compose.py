"""docker-compose.yml and every config it mounts are checked statically: no engine runs in CI.

This file: pinned images, build files, mounted configs, no interpolation, settings that
``Settings`` accepts, healthchecks of the port and path the command serves, dependencies
that wait for health, the stores, the compose-spec schema, and the image built from the
wheel. Secrets, tokens and published ports are in test_compose_access.py; telemetry,
Prometheus, Alertmanager and Grafana in test_compose_telemetry.py. Each checker that
returns problems (tests/deploy/compose_stack.py) is also shown a broken copy and must
name the break."""

from __future__ import annotations

import copy
import json
import re
from base64 import urlsafe_b64decode
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest
from sqlalchemy.engine import make_url

from tests.deploy.compose_stack import (
    GATE_TOKENS_SECRET,
    REPO,
    TOKENS_SECRET,
    Service,
    _advertised,
    _env,
    _service_secrets,
    _settings,
    _streamproc_services,
    healthcheck_problems,
    interpolation_problems,
    missing_files,
)
from tests.deploy.test_settings import is_command


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
