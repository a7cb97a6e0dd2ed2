"""docker-compose.yml, who can reach what: the stores' passwords from secrets, dev-only
secrets, the reviewers' and the gate callers' tokens files mounted as secrets (and the dev
token letting the sample tenant in), and ports published on localhost where the process
serves. Each checker is also shown a broken copy and must name the break."""

from __future__ import annotations

import copy
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from streamproc.review.page.auth import Reviewers
from tests.deploy.compose_stack import (
    DEV_TOKEN,
    GATE_DEV_TOKEN,
    GATE_README,
    GATE_TOKENS_SECRET,
    REPO,
    SECRETS_DIR,
    TOKENS_SECRET,
    Service,
    _env,
    _secret_path,
    _service_secrets,
    _settings,
    _streamproc_services,
    gate_dev_token_problems,
    gate_tokens_problems,
    published_port_problems,
    tokens_file_problems,
)


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
