"""Brokers for the integration tests, and the ``integration`` and ``slow`` marks on every
test here.

``kafka_bootstrap`` and ``kafka_restart`` (the session's real Apache Kafka) live in
tests/conftest.py, shared with the benchmarks' tests.
``tansu_bootstrap`` is the embedded Tansu broker the demo uses.
``secure_kafka`` is a second Kafka, started only when a test asks for it, in the security
mode of ``scripts/kafka.sh`` (SASL_SSL and SASL_PLAINTEXT listeners with PLAIN and SCRAM);
tests may ``restart`` it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from pydantic import SecretStr

from streamproc.kafka.brokers import EmbeddedTansu
from streamproc.kafka.options import KafkaSecurity
from tests.conftest import KAFKA_START_TIMEOUT_S, KAFKA_STOP_TIMEOUT_S, kafka_sh

# A real PostgreSQL server (tests/integration/postgres.py), for the audit store's tests.
from tests.integration.postgres import postgres_database, postgres_server  # noqa: F401

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration ``integration`` and ``slow`` (a broker
    starts), so ``-m 'not integration'`` or ``-m 'not slow'`` skips it."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)


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
        done = kafka_sh(command, self.env, KAFKA_START_TIMEOUT_S)
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
    started = kafka_sh("start", env, KAFKA_START_TIMEOUT_S)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or len(lines) != 4:
        kafka_sh("stop", env, KAFKA_STOP_TIMEOUT_S)
        pytest.fail(
            f"kafka.sh start (sasl_ssl) failed (exit {started.returncode}):\n"
            f"{started.stdout}\n{started.stderr}",
            pytrace=False,
        )
    try:
        yield _parse_secure(lines, env)
    finally:
        stopped = kafka_sh("stop", env, KAFKA_STOP_TIMEOUT_S)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka.sh stop failed:\n{stopped.stderr}\n")
