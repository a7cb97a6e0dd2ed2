"""Brokers for the integration tests, and the ``integration`` and ``slow`` marks on every
test here.

``kafka_bootstrap`` is a real Apache Kafka (KRaft) started by ``scripts/kafka.sh`` in a
per-session state dir (so parallel clones never share one), unless
``STREAMPROC_TEST_BOOTSTRAP`` names a broker that is already running.
``tansu_bootstrap`` is the embedded Tansu broker the demo uses.
``secure_kafka`` is a second Kafka, started only when a test asks for it, in the security
mode of ``scripts/kafka.sh`` (SASL_SSL and SASL_PLAINTEXT listeners with PLAIN and SCRAM);
tests may ``restart`` it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from pydantic import SecretStr

from streamproc.kafka.brokers import EmbeddedTansu
from streamproc.kafka.options import KafkaSecurity

# A real PostgreSQL server (tests/integration/postgres.py), for the audit store's tests.
from tests.integration.postgres import postgres_database, postgres_server  # noqa: F401

_HERE = Path(__file__).resolve().parent
_KAFKA_SH = _HERE.parents[1] / "scripts" / "kafka.sh"
# First run on a fresh machine resolves ~46 jars from Maven Central before the broker starts.
_KAFKA_START_TIMEOUT_S = 600
_KAFKA_STOP_TIMEOUT_S = 120


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration ``integration`` and ``slow`` (a broker
    starts), so ``-m 'not integration'`` or ``-m 'not slow'`` skips it."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)


def _kafka_sh(
    command: str, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(_KAFKA_SH), command],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@pytest.fixture(scope="session")
def kafka_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment ``scripts/kafka.sh`` runs with for the session's broker."""
    return {
        **os.environ,
        "STREAMPROC_KAFKA_STATE": str(tmp_path_factory.mktemp("kafka") / "state"),
        "PYTHON": sys.executable,
    }


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_env: dict[str, str]) -> Iterator[str]:
    """``host:port`` of a real Kafka broker for the whole session."""
    external = os.environ.get("STREAMPROC_TEST_BOOTSTRAP", "").strip()
    if external:
        yield external
        return
    started = _kafka_sh("start", kafka_env, _KAFKA_START_TIMEOUT_S)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines:
        _kafka_sh("stop", kafka_env, _KAFKA_STOP_TIMEOUT_S)
        pytest.fail(
            f"scripts/kafka.sh start failed (exit {started.returncode}):\n{started.stderr}",
            pytrace=False,
        )
    try:
        yield lines[-1]
    finally:
        stopped = _kafka_sh("stop", kafka_env, _KAFKA_STOP_TIMEOUT_S)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka.sh stop failed:\n{stopped.stderr}\n")


@pytest.fixture()
def kafka_restart(kafka_bootstrap: str, kafka_env: dict[str, str]) -> Callable[[], str]:
    """Restart the session's broker keeping its data (same port); returns its address."""
    if os.environ.get("STREAMPROC_TEST_BOOTSTRAP", "").strip():
        pytest.skip("STREAMPROC_TEST_BOOTSTRAP names a broker this session cannot restart")

    def restart() -> str:
        done = _kafka_sh("restart", kafka_env, _KAFKA_START_TIMEOUT_S)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            pytest.fail(f"kafka.sh restart failed:\n{done.stderr}", pytrace=False)
        assert lines[0] == kafka_bootstrap, "the broker came back on another port"
        return lines[0]

    return restart


@pytest.fixture(scope="session")
def tansu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of an embedded Tansu broker for the whole session."""
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedTansu(log_path=log_path) as broker:
        yield broker.bootstrap


SASL_USER = "alice"
SASL_PASSWORD = "alice-secret-4-tests"

SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@dataclass(frozen=True)
class SecureKafka:
    """A broker in kafka.sh's security mode: its listeners, CA and user, and a handle on
    the script (``restart``) for tests that need the process to go away."""

    bootstrap: str
    """The PLAINTEXT listener."""
    sasl_ssl: str
    sasl_plaintext: str
    ca_file: Path
    env: dict[str, str]
    username: str = SASL_USER
    password: str = SASL_PASSWORD

    def security(
        self,
        mechanism: SaslMechanism = "PLAIN",
        *,
        protocol: Literal["SASL_SSL", "SASL_PLAINTEXT"] = "SASL_SSL",
        password: str | None = None,
    ) -> KafkaSecurity:
        """Client settings for this broker's user; ``password`` overrides the right one."""
        return KafkaSecurity(
            protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=self.username,
            sasl_password=SecretStr(self.password if password is None else password),
            ssl_cafile=self.ca_file,
        )

    def address(self, protocol: Literal["SASL_SSL", "SASL_PLAINTEXT"]) -> str:
        return self.sasl_ssl if protocol == "SASL_SSL" else self.sasl_plaintext

    def run(self, command: str) -> list[str]:
        """``scripts/kafka.sh COMMAND`` on this broker; its stdout lines."""
        done = _kafka_sh(command, self.env, _KAFKA_START_TIMEOUT_S)
        if done.returncode != 0:
            pytest.fail(f"kafka.sh {command} failed:\n{done.stderr}", pytrace=False)
        return done.stdout.strip().splitlines()


def _parse_secure(lines: list[str], env: dict[str, str]) -> SecureKafka:
    extras = dict(line.split(" ", 1) for line in lines[1:])
    return SecureKafka(
        bootstrap=lines[0],
        sasl_ssl=extras["SASL_SSL"],
        sasl_plaintext=extras["SASL_PLAINTEXT"],
        ca_file=Path(extras["CA_FILE"]),
        env=env,
    )


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """A Kafka broker with SASL (PLAIN, SCRAM-SHA-256/512) over TLS and over plaintext."""
    env = {
        **os.environ,
        "STREAMPROC_KAFKA_STATE": str(tmp_path_factory.mktemp("kafka-secure") / "state"),
        "STREAMPROC_KAFKA_SECURITY": "sasl_ssl",
        "STREAMPROC_KAFKA_SASL_USER": SASL_USER,
        "STREAMPROC_KAFKA_SASL_PASSWORD": SASL_PASSWORD,
        "PYTHON": sys.executable,
    }
    started = _kafka_sh("start", env, _KAFKA_START_TIMEOUT_S)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or len(lines) != 4:
        _kafka_sh("stop", env, _KAFKA_STOP_TIMEOUT_S)
        pytest.fail(
            f"kafka.sh start (sasl_ssl) failed (exit {started.returncode}):\n"
            f"{started.stdout}\n{started.stderr}",
            pytrace=False,
        )
    try:
        yield _parse_secure(lines, env)
    finally:
        stopped = _kafka_sh("stop", env, _KAFKA_STOP_TIMEOUT_S)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka.sh stop failed:\n{stopped.stderr}\n")
