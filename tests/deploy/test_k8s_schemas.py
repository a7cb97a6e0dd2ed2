"""deploy/k8s against the Kubernetes JSON schemas and KEDA's CRD schemas, strictly (an
unknown field fails), and each schema shown a broken copy.

The schemas come from the ``kubernetes-validate`` package, which ships them for every release
it supports (no download at test time). kubeconform would need its schemas fetched at run
time, which this offline machine cannot do. KEDA's ScaledObject and TriggerAuthentication
are custom resources: kubernetes-validate does not know them, so they are validated against
KEDA's own CRD schemas, vendored in tests/deploy/keda."""

from __future__ import annotations

import copy
import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import cast

import pytest

from tests.deploy.crd import crd_problems, crd_schemas
from tests.deploy.k8s_manifests import KEDA, Obj, _container, _find, _trigger


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
