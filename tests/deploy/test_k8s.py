"""deploy/k8s is checked without a cluster: the objects the kustomization applies, images,
commands, credentials and placeholder secrets, no structural problem (``manifest_problems``
in tests/deploy/k8s_manifests.py), the autoscalers, and the gate's settings. The schemas
are checked in test_k8s_schemas.py; each rule of the checker is shown a broken copy in
test_k8s_broken_copies.py."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from tests.deploy.k8s_manifests import (
    GATE,
    GATE_COMMAND,
    K8S_DIR,
    PLACEHOLDER,
    REVIEW,
    REVIEW_PAGE,
    WORKLOADS,
    Obj,
    _containers,
    _data,
    _environment,
    _find,
    _gate,
    _kustomization,
    _target,
    _workload_settings,
    manifest_problems,
)
from tests.deploy.test_settings import is_command, settings_from_env


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
