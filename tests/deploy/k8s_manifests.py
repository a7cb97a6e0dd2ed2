"""deploy/k8s as the tests read it: the objects its kustomization applies, accessors into
them, and ``manifest_problems``, the checker for the mistakes a schema cannot see.

The checker follows the references between objects: probes aimed at a declared container
port and the path the command serves, envFrom naming a ConfigMap or Secret the
kustomization applies, volume mounts naming a volume and a Secret that exists, the
reviewers' tokens file under a read-only mount of a Secret holding that key, a selector
that matches its pods, settings ``Settings`` accepts, the health port the settings open
(and bound beyond 127.0.0.1), replicas within the partition count (one for the review
page), the instance id from the pod name, requests within limits; autoscalers aimed at a
workload that exists, one autoscaler per workload, CPU requests under a CPU target, and
KEDA's kafka trigger reading the judging group's lag on the answers topic of the broker
the settings name, with the broker's SASL and TLS and credentials from objects that hold
them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast

import yaml
from pydantic import ValidationError

from streamproc.config import Settings
from streamproc.monitor.judging_loop import judge_group_id
from tests.deploy.health import health_endpoint
from tests.deploy.test_settings import TRANSACTIONAL, UnknownSettingError, settings_from_env

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


def _container(objects: list[Obj], kind: str = "StatefulSet") -> Obj:
    name = "streamproc-worker" if kind == "StatefulSet" else "streamproc-audit-sink"
    return _containers(_find(objects, kind, name))[0]


def _gate(objects: list[Obj]) -> Obj:
    return _containers(_find(objects, "Deployment", GATE))[0]


def _trigger(objects: list[Obj]) -> dict[str, str]:
    (trigger,) = _find(objects, "ScaledObject", "streamproc-worker")["spec"]["triggers"]
    return cast(dict[str, str], trigger["metadata"])
