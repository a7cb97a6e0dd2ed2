"""deploy/k8s is checked without a cluster: against the Kubernetes JSON schemas, and for the
mistakes a schema cannot see.

The schemas come from the ``kubernetes-validate`` package, which ships them for every release
it supports (no download at test time). kubeconform would need its schemas fetched at run
time, which this offline machine cannot do. The structural checker ``manifest_problems``
follows the references between objects: probes aimed at a declared container port and the
path the command serves, envFrom naming a ConfigMap or Secret the kustomization applies, volume
mounts naming a volume and a Secret that exists, the reviewers' tokens file under a read-only
mount of a Secret holding that key, a selector that matches its pods, settings ``Settings``
accepts, the health port the settings open (and bound beyond 127.0.0.1), replicas within the
partition count (one for the review page), the instance id from the pod name, requests within
limits; autoscalers aimed at a workload that exists, one autoscaler per workload, CPU
requests under a CPU target, and KEDA's kafka trigger reading the judging group's lag on the
answers topic of the broker the settings name, with the broker's SASL and TLS and
credentials from objects that hold them. Each rule is also shown a broken copy and must name
the break. KEDA's ScaledObject and TriggerAuthentication are custom resources:
kubernetes-validate does not know them, so they are validated against KEDA's own CRD
schemas, vendored in tests/deploy/keda.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any, cast

import pytest
import yaml
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from streamproc.config import Settings
from streamproc.monitor.judging_loop import judge_group_id
from tests.deploy.crd import crd_problems, crd_schemas
from tests.deploy.health import health_endpoint
from tests.deploy.test_settings import (
    TRANSACTIONAL,
    UnknownSettingError,
    is_command,
    settings_from_env,
)

REPO = Path(__file__).resolve().parents[2]
K8S_DIR = REPO / "deploy" / "k8s"
WORKLOADS = {"Deployment", "StatefulSet"}
KEDA = "keda.sh/v1alpha1"
GATE = "streamproc-gate"  # the gate's Deployment, Service and HorizontalPodAutoscaler
GATE_COMMAND = ("gate", "serve")
SASL = {"SCRAM-SHA-512": "scram_sha512", "SCRAM-SHA-256": "scram_sha256", "PLAIN": "plaintext"}
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
REVIEW_PAGE = ("review", "serve")
REVIEW = "streamproc-review"  # the page's Deployment and Service
ALL_INTERFACES = {"0.0.0.0", "::"}
PLACEHOLDER = "REPLACE-ME"
POD_NAME = "streamproc-worker-0"  # what the downward API would put in a fieldRef

Obj = dict[str, Any]
_UNITS = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def _kustomization() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text()))


def load_objects() -> list[Obj]:
    """Every object the kustomization's resources hold, in order."""
    objects: list[Obj] = []
    for resource in _kustomization()["resources"]:
        path = K8S_DIR / resource
        assert path.is_file(), f"kustomization names missing {resource}"
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return objects


@pytest.fixture
def objects() -> list[Obj]:
    return load_objects()


def _find(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = (o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    return found


def _quantity(text: str | int | float) -> float:
    found = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    assert found and found.group(2) in _UNITS, f"not a quantity: {text!r}"
    return float(found.group(1)) * _UNITS[found.group(2)]


def _data(obj: Obj) -> dict[str, str]:
    """A ConfigMap's or Secret's keys (a Secret's ``data`` values stay base64: only names
    and placeholders matter here)."""
    return {**obj.get("data", {}), **obj.get("stringData", {})}


def _containers(workload: Obj) -> list[Obj]:
    return cast(list[Obj], workload["spec"]["template"]["spec"]["containers"])


def _env_source_problems(container: Obj, by_name: Mapping[tuple[str, str], Obj]) -> Iterator[str]:
    """envFrom entries naming an object the kustomization does not apply."""
    for source in container.get("envFrom", []):
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source and (kind, source[key]["name"]) not in by_name:
                yield f"envFrom names no {kind} {source[key]['name']}"


def _mount_problems(
    pod: Obj, container: Obj, by_name: Mapping[tuple[str, str], Obj]
) -> Iterator[str]:
    """Mounts of no volume, and Secret volumes of a Secret the kustomization lacks."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None:
            yield f"volumeMount {mount['name']} names no volume"
        elif "secret" in volume and ("Secret", volume["secret"]["secretName"]) not in by_name:
            yield f"volume {mount['name']} names no Secret {volume['secret']['secretName']}"


def _mounted_secret_file(
    path: PurePosixPath, pod: Obj, container: Obj, by_name: Mapping[tuple[str, str], Obj]
) -> str | None:
    """Why ``path`` is not a key of a Secret mounted read-only in ``container`` (None: it
    is one)."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        directory = PurePosixPath(mount["mountPath"])
        if path.parent != directory:
            continue
        secret = volumes.get(mount["name"], {}).get("secret")
        if secret is None:
            return f"{path} is not in a Secret volume"
        if not mount.get("readOnly"):
            return f"{path}: its mount {directory} is not read-only"
        keys = {item.get("path", item["key"]): item["key"] for item in secret.get("items", [])} or {
            key: key for key in _data(by_name.get(("Secret", secret["secretName"]), {}))
        }
        if path.name not in keys:
            return f"{path}: Secret {secret['secretName']} has no key {path.name}"
        return None
    return f"{path} is under no volumeMount"


def _environment(container: Obj, by_name: Mapping[tuple[str, str], Obj]) -> dict[str, str]:
    """The variables the container starts with, as far as the manifests decide them."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source and (kind, source[key]["name"]) in by_name:
                env.update(_data(by_name[kind, source[key]["name"]]))
    for item in container.get("env", []):
        field = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        env[item["name"]] = POD_NAME if field == "metadata.name" else str(item.get("value", ""))
    return env


def _workload_problems(workload: Obj, by_name: Mapping[tuple[str, str], Obj]) -> Iterator[str]:
    name = f"{workload['kind']} {workload['metadata']['name']}"
    spec = workload["spec"]
    selector = spec["selector"]["matchLabels"]
    labels = spec["template"]["metadata"].get("labels", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        yield f"{name}: selector {selector} does not match its pod labels {labels}"
    if workload["kind"] == "StatefulSet":
        governing = by_name.get(("Service", spec.get("serviceName", "")))
        if governing is None or governing["spec"].get("clusterIP") != "None":
            yield f"{name}: serviceName {spec.get('serviceName')} names no headless Service"

    for container in _containers(workload):
        where = f"{name}/{container['name']}"
        ports = {p["containerPort"] for p in container.get("ports", [])}
        names = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
        args = container.get("args") or [""]
        command = " ".join(args)
        endpoint = health_endpoint(args)
        for probe_name in PROBES:
            probe = container.get(probe_name)
            if probe is None:
                if probe_name != "startupProbe" and endpoint is not None:
                    yield f"{where}: no {probe_name}"
                continue
            if endpoint is None:
                yield f"{where}: {command} serves no health endpoint, {probe_name} would fail"
                continue
            path = endpoint.paths[probe_name]
            get = probe.get("httpGet", {})
            if get.get("port") not in ports | set(names):
                yield f"{where}: {probe_name} port {get.get('port')} is not a container port"
            if get.get("path") != path:
                yield f"{where}: {probe_name} asks {get.get('path')}, not {path}"

        resources = container.get("resources", {})
        for resource in ("cpu", "memory"):
            request = resources.get("requests", {}).get(resource)
            limit = resources.get("limits", {}).get(resource)
            if request is None or limit is None:
                yield f"{where}: {resource} needs a request and a limit"
            elif _quantity(request) > _quantity(limit):
                yield f"{where}: {resource} request {request} above its limit {limit}"

        yield from (f"{where}: {p}" for p in _env_source_problems(container, by_name))
        pod = spec["template"]["spec"]
        yield from (f"{where}: {p}" for p in _mount_problems(pod, container, by_name))
        env = _environment(container, by_name)
        try:
            settings = settings_from_env(env)
        except (UnknownSettingError, ValidationError) as error:
            yield f"{where}: settings refused: {error}"
            continue
        if endpoint is not None:
            port, named = endpoint.port(settings), names.get(endpoint.port_name)
            if port != named:
                yield (
                    f"{where}: health port {port} is not the containerPort named "
                    f"{endpoint.port_name} ({named})"
                )
            host = endpoint.host(settings) if endpoint.host is not None else None
            if host is not None and host not in ALL_INTERFACES:
                yield f"{where}: binds {host}: neither probes nor Services reach it"
        for tokens in (settings.review.tokens_file, settings.gate.tokens_file):
            if tokens is not None:
                why = _mounted_secret_file(PurePosixPath(tokens), pod, container, by_name)
                if why is not None:
                    yield f"{where}: tokens file {why}"
        if tuple(args) == GATE_COMMAND and settings.gate.tokens_file is None:
            yield f"{where}: no STREAMPROC_GATE__TOKENS_FILE: every request would get 401"
        if tuple(args) == REVIEW_PAGE and spec.get("replicas", 1) != 1:
            yield (
                f"{name}: replicas {spec['replicas']}: each signs sessions with its own key, "
                "so reviewers would be signed out (sticky sessions needed)"
            )
        if command in TRANSACTIONAL and env.get("STREAMPROC_WORKER__INSTANCE_ID") != POD_NAME:
            yield f"{where}: STREAMPROC_WORKER__INSTANCE_ID is not the pod name"
        replicas = spec.get("replicas", 1)
        if replicas > settings.topics.partitions:
            yield f"{name}: replicas {replicas} > partitions {settings.topics.partitions}"


def _service_problems(service: Obj, workloads: list[Obj]) -> Iterator[str]:
    name = f"Service {service['metadata']['name']}"
    selector = service["spec"].get("selector", {})
    pods = [
        w
        for w in workloads
        if selector and selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
    ]
    if not pods:
        yield f"{name} selects no pod"
    for port in service["spec"].get("ports", []):
        target = port.get("targetPort", port["port"])
        for pod in pods:
            declared = {
                key
                for c in _containers(pod)
                for p in c.get("ports", [])
                for key in (p["containerPort"], p.get("name"))
            }
            if target not in declared:
                yield f"{name}: targetPort {target} is not a port of {pod['metadata']['name']}"


def _target(scaler: Obj) -> tuple[str, str]:
    ref = scaler["spec"]["scaleTargetRef"]
    return ref.get("kind", "Deployment"), ref["name"]


def _workload_settings(workload: Obj, by_name: Mapping[tuple[str, str], Obj]) -> Settings:
    return settings_from_env(_environment(_containers(workload)[0], by_name))


def _kafka_trigger_problems(
    name: str, trigger: Obj, settings: Settings, by_name: Mapping[tuple[str, str], Obj]
) -> Iterator[str]:
    """The lag KEDA reads must be the judging loop's, on the broker the workers use."""
    meta = trigger.get("metadata", {})
    wanted = {
        "consumerGroup": judge_group_id(settings.app_id),
        "topic": settings.topics.answers,
        "bootstrapServers": settings.bootstrap_servers,
    }
    for key, value in wanted.items():
        if meta.get(key) != value:
            yield f"{name}: kafka trigger {key} {meta.get(key)!r}, not {value!r}"
    if int(meta.get("lagThreshold", "10")) < 1:
        yield f"{name}: lagThreshold {meta.get('lagThreshold')} below 1"
    protocol = settings.security.protocol
    if protocol.startswith("SASL_"):
        mechanism = SASL.get(settings.security.sasl_mechanism or "")
        if meta.get("sasl") != mechanism:
            yield f"{name}: sasl {meta.get('sasl')!r}, the broker wants {mechanism!r}"
        auth = by_name.get(
            ("TriggerAuthentication", trigger.get("authenticationRef", {}).get("name", ""))
        )
        if auth is None:
            yield f"{name}: SASL without a TriggerAuthentication"
        else:
            yield from _auth_problems(auth, by_name)
    if protocol.endswith("SSL") != (meta.get("tls") == "enable"):
        yield f"{name}: tls {meta.get('tls')!r} for a {protocol} broker"


def _auth_problems(auth: Obj, by_name: Mapping[tuple[str, str], Obj]) -> Iterator[str]:
    name = f"TriggerAuthentication {auth['metadata']['name']}"
    given: set[str] = set()
    for field, kind in (("secretTargetRef", "Secret"), ("configMapTargetRef", "ConfigMap")):
        for ref in auth["spec"].get(field, []):
            source = by_name.get((kind, ref["name"]))
            if source is None:
                yield f"{name}: {ref['parameter']} from no {kind} {ref['name']}"
            elif ref["key"] not in _data(source):
                yield f"{name}: {kind} {ref['name']} has no key {ref['key']}"
            given.add(ref["parameter"])
    for parameter in sorted({"username", "password"} - given):
        yield f"{name}: no {parameter}"


def _autoscaler_problems(
    objects: list[Obj], by_name: Mapping[tuple[str, str], Obj]
) -> Iterator[str]:
    """HorizontalPodAutoscalers and KEDA ScaledObjects (which make their own HPA)."""
    scalers = [o for o in objects if o["kind"] in {"HorizontalPodAutoscaler", "ScaledObject"}]
    targets = Counter(_target(s) for s in scalers)
    for (kind, target), count in targets.items():
        if count > 1:
            yield f"{kind} {target}: {count} autoscalers on one workload"
    for scaler in scalers:
        name = f"{scaler['kind']} {scaler['metadata']['name']}"
        workload = by_name.get(_target(scaler))
        if workload is None:
            yield f"{name}: scaleTargetRef names no {' '.join(_target(scaler))}"
            continue
        spec = scaler["spec"]
        low, high = (
            (spec.get("minReplicas", 1), spec["maxReplicas"])
            if scaler["kind"] == "HorizontalPodAutoscaler"
            else (spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100))
        )
        if low > high:
            yield f"{name}: min replicas {low} above max {high}"
        if "replicas" in workload["spec"]:
            yield f"{name}: {workload['metadata']['name']} sets replicas, which apply would reset"
        try:
            settings = _workload_settings(workload, by_name)
        except (UnknownSettingError, ValidationError):
            continue  # named with the workload's own problems
        if workload["kind"] == "StatefulSet" and high > settings.topics.partitions:
            yield f"{name}: max replicas {high} > partitions {settings.topics.partitions}"
        for metric in spec.get("metrics", []):
            resource = metric.get("resource", {}).get("name")
            if resource and any(
                resource not in c.get("resources", {}).get("requests", {})
                for c in _containers(workload)
            ):
                yield f"{name}: a {resource} target on containers without a {resource} request"
        for trigger in spec.get("triggers", []):
            if trigger["type"] == "kafka":
                yield from _kafka_trigger_problems(name, trigger, settings, by_name)


def manifest_problems(objects: list[Obj]) -> list[str]:
    """The mistakes a schema cannot see, across all objects of the kustomization."""
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    problems = [
        f"duplicate {kind} {name}"
        for kind, name in by_name
        if sum(o["kind"] == kind and o["metadata"]["name"] == name for o in objects) > 1
    ]
    workloads = [o for o in objects if o["kind"] in WORKLOADS]
    for workload in workloads:
        problems.extend(_workload_problems(workload, by_name))
    for service in (o for o in objects if o["kind"] == "Service"):
        problems.extend(_service_problems(service, workloads))
    for budget in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
        selector = budget["spec"]["selector"]["matchLabels"]
        if not any(
            selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
            for w in workloads
        ):
            problems.append(f"PodDisruptionBudget {budget['metadata']['name']} selects no pod")
    problems.extend(_autoscaler_problems(objects, by_name))
    return problems


def test_the_kustomization_applies_what_is_here(objects: list[Obj]) -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects)
    assert kinds == [
        ("ConfigMap", "streamproc-config"),
        ("Deployment", "streamproc-audit-sink"),
        ("Deployment", GATE),
        ("Deployment", "streamproc-review"),
        ("HorizontalPodAutoscaler", GATE),
        ("PodDisruptionBudget", "streamproc-worker"),
        ("ScaledObject", "streamproc-worker"),
        ("Secret", "streamproc-audit-store"),
        ("Secret", "streamproc-broker"),
        ("Secret", "streamproc-gate-tokens"),
        ("Secret", "streamproc-review-store"),
        ("Secret", "streamproc-review-tokens"),
        ("Service", GATE),
        ("Service", "streamproc-review"),
        ("Service", "streamproc-worker"),
        ("StatefulSet", "streamproc-worker"),
        ("TriggerAuthentication", "streamproc-kafka"),
    ]
    listed = set(_kustomization()["resources"])
    on_disk = {p.name for p in K8S_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk, "a manifest in deploy/k8s that kustomize never applies"


def test_images_are_the_kustomized_one(objects: list[Obj]) -> None:
    images = {i["name"]: i["newTag"] for i in _kustomization()["images"]}
    for workload in (o for o in objects if o["kind"] in WORKLOADS):
        for container in _containers(workload):
            name, _, tag = container["image"].partition(":")
            assert images.get(name) == tag, f"{container['image']} is not set in kustomization"


def test_commands_are_the_worker_the_sink_and_the_page(objects: list[Obj]) -> None:
    worker = _containers(_find(objects, "StatefulSet", "streamproc-worker"))[0]
    sink = _containers(_find(objects, "Deployment", "streamproc-audit-sink"))[0]
    page = _containers(_find(objects, "Deployment", "streamproc-review"))[0]
    gate = _gate(objects)
    assert (worker["args"], sink["args"], page["args"], gate["args"]) == (
        ["worker"],
        ["audit-sink"],
        list(REVIEW_PAGE),
        list(GATE_COMMAND),
    )
    for container in (worker, sink, page, gate):
        assert "command" not in container, "the image's entrypoint runs"
        assert is_command(container["args"])


def test_broker_credentials_come_from_the_secret(objects: list[Obj]) -> None:
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    config = _data(by_name["ConfigMap", "streamproc-config"])
    assert not any("PASSWORD" in key for key in config), "a password in the ConfigMap"
    for workload in (o for o in objects if o["kind"] in WORKLOADS):
        env = _environment(_containers(workload)[0], by_name)
        settings = settings_from_env(env)
        assert settings.security.protocol.startswith("SASL_")
        assert settings.security.sasl_password is not None
        assert "streamproc-broker" in {
            s["secretRef"]["name"] for s in _containers(workload)[0]["envFrom"] if "secretRef" in s
        }


def test_only_the_sink_reads_the_store_password(objects: list[Obj]) -> None:
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    sink = _environment(
        _containers(_find(objects, "Deployment", "streamproc-audit-sink"))[0], by_name
    )
    worker = _environment(
        _containers(_find(objects, "StatefulSet", "streamproc-worker"))[0], by_name
    )
    assert "PGPASSWORD" in sink and "PGPASSWORD" not in worker
    assert ":" not in settings_from_env(sink).audit.store_url.split("@")[0].split("//")[1]


def _secret_refs(container: Obj) -> set[str]:
    return {s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s}


def test_the_page_reads_its_own_store_password_only(objects: list[Obj]) -> None:
    """The page, which reviewers reach, holds no credential of the audit store: its own
    Secret, its own database user, no password in the URL."""
    page = _containers(_find(objects, "Deployment", REVIEW))[0]
    assert "streamproc-review-store" in _secret_refs(page)
    assert "streamproc-audit-store" not in _secret_refs(page)
    others = [o for o in objects if o["kind"] in WORKLOADS and o["metadata"]["name"] != REVIEW]
    assert others and not any(
        "streamproc-review-store" in _secret_refs(_containers(o)[0]) for o in others
    )
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    settings = settings_from_env(_environment(page, by_name))
    review_url = make_url(settings.review.store_url)
    audit_url = make_url(settings.audit.store_url)
    assert review_url.drivername == "postgresql+psycopg"
    assert review_url.password is None, "the password is PGPASSWORD, from the Secret"
    assert review_url.username != audit_url.username
    assert review_url.database != audit_url.database


def test_the_page_and_the_workers_mount_the_tokens_file(objects: list[Obj]) -> None:
    """Both read it (the page to sign reviewers in, the labels loop to refuse labels of
    reviewers not allowed the tenant); the audit sink does not."""
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    readers = {
        workload["metadata"]["name"]
        for workload in (o for o in objects if o["kind"] in WORKLOADS)
        if settings_from_env(_environment(_containers(workload)[0], by_name)).review.tokens_file
        is not None
    }
    assert readers == {"streamproc-worker", "streamproc-review"}


def test_secrets_hold_placeholders_only(objects: list[Obj]) -> None:
    for secret in (o for o in objects if o["kind"] == "Secret"):
        assert "data" not in secret, "base64 data could hide a real value: use stringData"
        assert set(secret["stringData"].values()) == {PLACEHOLDER}, secret["metadata"]["name"]


def test_the_manifests_have_no_structural_problem(objects: list[Obj]) -> None:
    assert manifest_problems(objects) == []


def _container(objects: list[Obj], kind: str = "StatefulSet") -> Obj:
    name = "streamproc-worker" if kind == "StatefulSet" else "streamproc-audit-sink"
    return _containers(_find(objects, kind, name))[0]


def _gate(objects: list[Obj]) -> Obj:
    return _containers(_find(objects, "Deployment", GATE))[0]


def _gate_env(objects: list[Obj], name: str) -> Obj:
    (item,) = (e for e in _gate(objects)["env"] if e["name"] == name)
    return cast(Obj, item)


def _trigger(objects: list[Obj]) -> dict[str, str]:
    (trigger,) = _find(objects, "ScaledObject", "streamproc-worker")["spec"]["triggers"]
    return cast(dict[str, str], trigger["metadata"])


def _page(objects: list[Obj]) -> Obj:
    return _containers(_find(objects, "Deployment", "streamproc-review"))[0]


def _page_volume(objects: list[Obj]) -> Obj:
    (volume,) = _find(objects, "Deployment", "streamproc-review")["spec"]["template"]["spec"][
        "volumes"
    ]
    return cast(Obj, volume)


def _tokens_env(container: Obj) -> Obj:
    (item,) = (e for e in container["env"] if e["name"] == "STREAMPROC_REVIEW__TOKENS_FILE")
    return cast(Obj, item)


def _config(objects: list[Obj]) -> dict[str, str]:
    return cast(dict[str, str], _find(objects, "ConfigMap", "streamproc-config")["data"])


def _literal_instance_id(objects: list[Obj]) -> None:
    (item,) = (e for e in _container(objects)["env"] if e["name"].endswith("WORKER__INSTANCE_ID"))
    item.pop("valueFrom")
    item["value"] = "worker"


MUTATIONS: dict[str, tuple[Callable[[list[Obj]], None], str]] = {
    "probe port": (
        lambda o: _container(o)["livenessProbe"]["httpGet"].update(port=9090),
        "livenessProbe port 9090 is not a container port",
    ),
    "probe path": (
        lambda o: _container(o)["readinessProbe"]["httpGet"].update(path="/livez"),
        "readinessProbe asks /livez, not /readyz",
    ),
    "missing probe": (
        lambda o: _container(o).pop("livenessProbe"),
        "no livenessProbe",
    ),
    "probe on the sink": (
        lambda o: _container(o, "Deployment").update(
            livenessProbe=_container(o)["livenessProbe"], ports=_container(o)["ports"]
        ),
        "audit-sink serves no health endpoint, livenessProbe would fail",
    ),
    "config map name": (
        lambda o: _container(o)["envFrom"][0]["configMapRef"].update(name="streamproc-cfg"),
        "envFrom names no ConfigMap streamproc-cfg",
    ),
    "secret name": (
        lambda o: _container(o)["envFrom"][1]["secretRef"].update(name="kafka-creds"),
        "envFrom names no Secret kafka-creds",
    ),
    "misspelt setting": (
        lambda o: _config(o).update(STREAMPROC_WORKER__HEALT_PORT="8081"),
        "settings refused: Settings has no field for ['STREAMPROC_WORKER__HEALT_PORT']",
    ),
    "bad setting value": (
        lambda o: _config(o).update(STREAMPROC_TELEMETRY__EXPORTER="jaeger"),
        "settings refused",
    ),
    "health port": (
        lambda o: _config(o).update(STREAMPROC_WORKER__HEALTH_PORT="9000"),
        "health port 9000 is not the containerPort named health (8081)",
    ),
    "replicas": (
        lambda o: _find(o, "StatefulSet", "streamproc-worker")["spec"].update(replicas=7),
        "replicas 7 > partitions 6",
    ),
    "selector": (
        lambda o: _find(o, "Deployment", "streamproc-audit-sink")["spec"]["selector"][
            "matchLabels"
        ].update({"app.kubernetes.io/component": "worker"}),
        "does not match its pod labels",
    ),
    "budget": (
        lambda o: _find(o, "PodDisruptionBudget", "streamproc-worker")["spec"]["selector"][
            "matchLabels"
        ].update({"app.kubernetes.io/component": "judge"}),
        "PodDisruptionBudget streamproc-worker selects no pod",
    ),
    "service name": (
        lambda o: _find(o, "StatefulSet", "streamproc-worker")["spec"].update(serviceName="w"),
        "serviceName w names no headless Service",
    ),
    "service port": (
        lambda o: _find(o, "Service", "streamproc-worker")["spec"]["ports"][0].update(
            targetPort="no-such-port"
        ),
        "targetPort no-such-port is not a port of streamproc-worker",
    ),
    "service selector": (
        lambda o: _find(o, "Service", "streamproc-worker")["spec"].update(selector={"a": "b"}),
        "Service streamproc-worker selects no pod",
    ),
    "instance id": (
        _literal_instance_id,
        "STREAMPROC_WORKER__INSTANCE_ID is not the pod name",
    ),
    "requests above limits": (
        lambda o: _container(o)["resources"]["requests"].update(memory="2Gi"),
        "memory request 2Gi above its limit 1536Mi",
    ),
    "no limits": (
        lambda o: _container(o, "Deployment")["resources"].pop("limits"),
        "cpu needs a request and a limit",
    ),
    "page probe path": (
        lambda o: _page(o)["livenessProbe"]["httpGet"].update(path="/livez"),
        "review/review: livenessProbe asks /livez, not /healthz",
    ),
    "page probe port": (
        lambda o: _page(o)["readinessProbe"]["httpGet"].update(port="health"),
        "readinessProbe port health is not a container port",
    ),
    "page port setting": (
        lambda o: _config(o).update(STREAMPROC_REVIEW__PORT="8080"),
        "health port 8080 is not the containerPort named http (8780)",
    ),
    "page on localhost": (
        lambda o: _config(o).update(STREAMPROC_REVIEW__HOST="127.0.0.1"),
        "binds 127.0.0.1: neither probes nor Services reach it",
    ),
    "page replicas": (
        lambda o: _find(o, "Deployment", "streamproc-review")["spec"].update(replicas=2),
        "Deployment streamproc-review: replicas 2: each signs sessions with its own key",
    ),
    "page service port": (
        lambda o: _find(o, "Service", "streamproc-review")["spec"]["ports"][0].update(
            targetPort="health"
        ),
        "targetPort health is not a port of streamproc-review",
    ),
    "tokens secret name": (
        lambda o: _page_volume(o)["secret"].update(secretName="reviewers"),
        "volume review-tokens names no Secret reviewers",
    ),
    "tokens mount name": (
        lambda o: _container(o)["volumeMounts"][0].update(name="tokens"),
        "StatefulSet streamproc-worker/worker: volumeMount tokens names no volume",
    ),
    "tokens file path": (
        lambda o: _tokens_env(_container(o)).update(value="/etc/streamproc/tokens.toml"),
        "worker: tokens file /etc/streamproc/tokens.toml is under no volumeMount",
    ),
    "tokens file key": (
        lambda o: _tokens_env(_page(o)).update(value="/etc/streamproc/review/reviewers.toml"),
        "Secret streamproc-review-tokens has no key reviewers.toml",
    ),
    "tokens mount writable": (
        lambda o: _page(o)["volumeMounts"][0].pop("readOnly"),
        "its mount /etc/streamproc/review is not read-only",
    ),
    "gate readiness path": (
        lambda o: _gate(o)["readinessProbe"]["httpGet"].update(path="/healthz"),
        "gate/gate: readinessProbe asks /healthz, not /readyz",
    ),
    "gate on localhost": (
        lambda o: _gate_env(o, "STREAMPROC_GATE__HOST").update(value="127.0.0.1"),
        "gate/gate: binds 127.0.0.1",
    ),
    "gate port setting": (
        lambda o: _gate_env(o, "STREAMPROC_GATE__PORT").update(value="8080"),
        "health port 8080 is not the containerPort named http (8790)",
    ),
    "gate tokens key": (
        lambda o: _gate_env(o, "STREAMPROC_GATE__TOKENS_FILE").update(
            value="/etc/streamproc/gate/callers.toml"
        ),
        "Secret streamproc-gate-tokens has no key callers.toml",
    ),
    "gate without tokens": (
        lambda o: _gate(o)["env"].remove(_gate_env(o, "STREAMPROC_GATE__TOKENS_FILE")),
        "no STREAMPROC_GATE__TOKENS_FILE: every request would get 401",
    ),
    "gate policy value": (
        lambda o: _gate_env(o, "STREAMPROC_GATE__POLICY").update(value="fail-safe"),
        "gate/gate: settings refused",
    ),
    "hpa target": (
        lambda o: _find(o, "HorizontalPodAutoscaler", GATE)["spec"]["scaleTargetRef"].update(
            name="gate"
        ),
        "HorizontalPodAutoscaler streamproc-gate: scaleTargetRef names no Deployment gate",
    ),
    "hpa without cpu request": (
        lambda o: _gate(o)["resources"]["requests"].pop("cpu"),
        "a cpu target on containers without a cpu request",
    ),
    "hpa and replicas": (
        lambda o: _find(o, "Deployment", GATE)["spec"].update(replicas=2),
        "streamproc-gate sets replicas, which apply would reset",
    ),
    "two autoscalers": (
        lambda o: o.append(
            {
                **copy.deepcopy(_find(o, "HorizontalPodAutoscaler", GATE)),
                "metadata": {"name": "streamproc-worker"},
                "spec": {
                    **_find(o, "HorizontalPodAutoscaler", GATE)["spec"],
                    "scaleTargetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "StatefulSet",
                        "name": "streamproc-worker",
                    },
                },
            }
        ),
        "StatefulSet streamproc-worker: 2 autoscalers on one workload",
    ),
    "keda beyond partitions": (
        lambda o: _find(o, "ScaledObject", "streamproc-worker")["spec"].update(maxReplicaCount=12),
        "max replicas 12 > partitions 6",
    ),
    "keda group": (
        lambda o: _trigger(o).update(consumerGroup="streamproc.windows"),
        "kafka trigger consumerGroup 'streamproc.windows', not 'streamproc.judge'",
    ),
    "keda topic": (
        lambda o: _trigger(o).update(topic="groundedness.verdicts"),
        "kafka trigger topic 'groundedness.verdicts', not 'assistant.answers'",
    ),
    "keda broker": (
        lambda o: _trigger(o).update(bootstrapServers="kafka:9092"),
        "kafka trigger bootstrapServers 'kafka:9092'",
    ),
    "keda sasl": (
        lambda o: _trigger(o).update(sasl="plaintext"),
        "sasl 'plaintext', the broker wants 'scram_sha512'",
    ),
    "keda tls": (
        lambda o: _trigger(o).update(tls="disable"),
        "tls 'disable' for a SASL_SSL broker",
    ),
    "keda password key": (
        lambda o: _find(o, "TriggerAuthentication", "streamproc-kafka")["spec"]["secretTargetRef"][
            0
        ].update(key="PASSWORD"),
        "Secret streamproc-broker has no key PASSWORD",
    ),
    "keda username": (
        lambda o: _find(o, "TriggerAuthentication", "streamproc-kafka")["spec"].pop(
            "configMapTargetRef"
        ),
        "TriggerAuthentication streamproc-kafka: no username",
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_broken_copy_is_named(objects: list[Obj], mutation: str) -> None:
    mutate, expected = MUTATIONS[mutation]
    broken = copy.deepcopy(objects)
    mutate(broken)
    problems = manifest_problems(broken)
    assert any(expected in p for p in problems), problems


def _kubernetes_validate() -> ModuleType:
    try:
        return importlib.import_module("kubernetes_validate")
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("kubernetes-validate (the Kubernetes JSON schemas) is not installed")
        pytest.skip("kubernetes-validate (the Kubernetes JSON schemas) is not installed")


def test_every_object_matches_the_kubernetes_schemas(objects: list[Obj]) -> None:
    """Strict: an unknown field (a typo) fails too. Against the oldest and the newest
    Kubernetes release the package ships schemas for."""
    kv = _kubernetes_validate()
    versions = kv.utils.all_versions()
    for version in (versions[0], versions[-1]):
        for obj in objects:
            if obj["apiVersion"] != KEDA:
                kv.validate(obj, version, strict=True)


def test_keda_objects_match_kedas_crd_schemas(objects: list[Obj]) -> None:
    """KEDA's custom resources, against the CRDs of the KEDA release vendored in
    tests/deploy/keda (strict: an unknown field fails)."""
    schemas = crd_schemas()
    custom = [o for o in objects if o["apiVersion"] == KEDA]
    assert {o["kind"] for o in custom} == {"ScaledObject", "TriggerAuthentication"}
    for obj in custom:
        assert crd_problems(obj, schemas) == [], obj["metadata"]["name"]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (
            lambda o: _find(o, "ScaledObject", "streamproc-worker")["spec"].update(maxReplicas=6),
            "'maxReplicas' was unexpected",
        ),
        (lambda o: cast(Obj, _trigger(o)).update(lagThreshold=500), "500 is not of type 'string'"),
        (
            lambda o: _find(o, "ScaledObject", "streamproc-worker")["spec"].pop("scaleTargetRef"),
            "'scaleTargetRef' is a required property",
        ),
        (
            lambda o: _find(o, "TriggerAuthentication", "streamproc-kafka")["spec"][
                "secretTargetRef"
            ][0].pop("parameter"),
            "'parameter' is a required property",
        ),
    ],
    ids=["unknown field", "threshold as number", "no target", "ref without parameter"],
)
def test_the_crd_schemas_reject_a_broken_copy(
    objects: list[Obj], mutate: Callable[[list[Obj]], None], problem: str
) -> None:
    schemas = crd_schemas()
    mutate(objects)
    found = [p for o in objects if o["apiVersion"] == KEDA for p in crd_problems(o, schemas)]
    assert any(problem in p for p in found), found


def test_the_workers_have_one_autoscaler_kedas_and_the_gate_one_on_cpu(
    objects: list[Obj],
) -> None:
    scaled = _find(objects, "ScaledObject", "streamproc-worker")["spec"]
    assert scaled["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "streamproc-worker",
    }
    assert [t["type"] for t in scaled["triggers"]] == ["kafka"]
    assert 1 <= scaled["minReplicaCount"] <= scaled["maxReplicaCount"]
    hpas = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert [_target(h) for h in hpas] == [("Deployment", GATE)]
    (metric,) = hpas[0]["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100
    assert hpas[0]["spec"]["minReplicas"] >= 2, "one replica down must not stop the gate"


def test_the_gate_reads_its_settings_and_tokens(objects: list[Obj]) -> None:
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    settings = _workload_settings(_find(objects, "Deployment", GATE), by_name)
    assert settings.gate.host == "0.0.0.0" and settings.gate.port == 8790
    assert str(settings.gate.tokens_file) == "/etc/streamproc/gate/tokens.toml"
    assert settings.gate.publish and settings.gate.policy == "fail-open"
    assert settings.review.tokens_file is None, "the gate needs no reviewers' tokens"
    (port,) = by_name["Service", GATE]["spec"]["ports"]
    assert port["targetPort"] == "http"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda o: _container(o)["ports"][0].update(containerPort="8081"),
        lambda o: _find(o, "StatefulSet", "streamproc-worker")["spec"].update(replica=2),
        lambda o: _container(o)["livenessProbe"].update(httpGet={"path": "/livez"}),
        lambda o: _find(o, "Secret", "streamproc-broker").update(stringdata={}),
    ],
    ids=["port as text", "unknown field", "probe without port", "misspelt stringData"],
)
def test_the_schemas_reject_a_broken_copy(
    objects: list[Obj], mutate: Callable[[list[Obj]], None]
) -> None:
    kv = _kubernetes_validate()
    before = {id(o): copy.deepcopy(o) for o in objects}
    mutate(objects)
    (changed,) = (o for o in objects if o != before[id(o)])
    with pytest.raises(kv.ValidationError):
        kv.validate(changed, kv.utils.latest_version(), strict=True)
