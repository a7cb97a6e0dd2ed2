"""Each rule of the structural checker ``manifest_problems`` (tests/deploy/k8s_manifests.py)
is shown a broken copy of deploy/k8s and must name the break."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import cast

import pytest

from tests.deploy.k8s_manifests import (
    GATE,
    Obj,
    _container,
    _containers,
    _find,
    _gate,
    _trigger,
    manifest_problems,
)


def _gate_env(objects: list[Obj], name: str) -> Obj:
    (item,) = (e for e in _gate(objects)["env"] if e["name"] == name)
    return cast(Obj, item)


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
