"""docker-compose.yml is checked statically, since no Docker engine runs in CI.

What would break ``docker compose up`` or a worker at start-up is checked here: unpinned images,
missing build files or mounted configs, worker settings that ``Settings`` rejects or that point
at a broker listener Kafka does not advertise, and dependencies that do not wait for health.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from streamproc.config import Settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
PREFIX = "STREAMPROC_"

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


def _known_setting(name: str) -> bool:
    """Whether ``STREAMPROC_A__B`` names a field; unknown top-level names are ignored silently
    by pydantic-settings, so constructing ``Settings`` alone would not catch a typo there."""
    model: type[BaseModel] = Settings
    parts = name.removeprefix(PREFIX).lower().split("__")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if depth < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def _worker(services: dict[str, Service]) -> Service:
    assert "worker" in services
    return services["worker"]


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


def test_mounted_repo_files_exist(services: dict[str, Service]) -> None:
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.get("source", "") if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{name}: mounts missing {source}"


def test_worker_settings_are_accepted(
    services: dict[str, Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_env = _env(_worker(services))
    ours = {key: value for key, value in worker_env.items() if key.startswith(PREFIX)}
    for required in (
        "STREAMPROC_BROKER_URL",
        "STREAMPROC_TOPICS__PARTITIONS",
        "STREAMPROC_LOG_JSON",
    ):
        assert required in ours, f"worker lacks {required}"
    unknown = [key for key in ours if not _known_setting(key)]
    assert not unknown, f"Settings has no field for {unknown}"

    for key in list(os.environ):
        if key.startswith(PREFIX):
            monkeypatch.delenv(key)
    for key, value in ours.items():
        monkeypatch.setenv(key, value)
    settings = Settings()

    assert settings.broker_flavour == "kafka"
    assert settings.topics.partitions == int(ours["STREAMPROC_TOPICS__PARTITIONS"])
    host, _, port = settings.bootstrap_servers.partition(":")
    kafka = services.get(host)
    assert kafka is not None, f"broker host {host!r} is not a compose service"
    assert (host, int(port)) in _advertised(kafka), "worker uses an unadvertised listener"


def test_worker_waits_for_a_healthy_kafka(services: dict[str, Service]) -> None:
    depends = _worker(services).get("depends_on")
    assert isinstance(depends, dict), "depends_on needs the long form to carry conditions"
    assert depends["kafka"]["condition"] == "service_healthy"
    for name, dependency in depends.items():
        assert name in services
        assert "condition" in dependency
    assert services["kafka"]["healthcheck"]["test"], "kafka has no healthcheck"


def test_worker_runs_replicated_and_restarts(services: dict[str, Service]) -> None:
    worker = _worker(services)
    assert worker.get("deploy", {}).get("replicas", 1) >= 2
    assert worker.get("restart") in {"always", "unless-stopped", "on-failure"}
    assert "container_name" not in worker, "a fixed name cannot be replicated"
    partitions = int(_env(worker)["STREAMPROC_TOPICS__PARTITIONS"])
    assert partitions >= worker["deploy"]["replicas"], "some workers would get no partition"


def test_kafka_runs_kraft_single_node(services: dict[str, Service]) -> None:
    env = _env(services["kafka"])
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", "the worker creates topics"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[key] == "1"
    cluster_id = env["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cluster_id + "=" * (-len(cluster_id) % 4))) == 16


def test_traces_reach_jaeger(services: dict[str, Service]) -> None:
    endpoint = urlsplit(_env(_worker(services))["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname in services, "OTLP endpoint is not a compose service"
    collector = services[endpoint.hostname]
    assert collector["image"].startswith("otel/opentelemetry-collector-contrib:")

    mounts = [v.split(":")[0] for v in collector["volumes"] if isinstance(v, str)]
    config_path = next(REPO / m for m in mounts if m.endswith((".yaml", ".yml")))
    config = cast(dict[str, Any], yaml.safe_load(config_path.read_text()))
    grpc = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert grpc.rsplit(":", 1)[1] == str(endpoint.port), "collector listens elsewhere"

    pipeline = config["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        for component in pipeline[kind]:
            assert component in config[kind], f"{kind[:-1]} {component} is not defined"
    exporter_hosts = {
        config["exporters"][name]["endpoint"].rsplit(":", 1)[0] for name in pipeline["exporters"]
    }
    assert exporter_hosts <= set(services), "collector exports to an unknown host"


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
    jsonschema.Draft7Validator(schema).validate(compose)
