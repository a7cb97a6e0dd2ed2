"""Brokers for the integration tests, and the ``integration`` mark on every test here.

``kafka_bootstrap`` is a real Apache Kafka (KRaft) started by ``scripts/kafka.sh`` in a
per-session state dir (so parallel clones never share one), unless
``STREAMPROC_TEST_BOOTSTRAP`` names a broker that is already running.
``tansu_bootstrap`` is the embedded Tansu broker the demo uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.brokers import EmbeddedTansu

_HERE = Path(__file__).resolve().parent
_KAFKA_SH = _HERE.parents[1] / "scripts" / "kafka.sh"
# First run on a fresh machine resolves ~46 jars from Maven Central before the broker starts.
_KAFKA_START_TIMEOUT_S = 600
_KAFKA_STOP_TIMEOUT_S = 120


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration, so ``-m 'not integration'`` skips it."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


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
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a real Kafka broker for the whole session."""
    external = os.environ.get("STREAMPROC_TEST_BOOTSTRAP", "").strip()
    if external:
        yield external
        return
    env = {
        **os.environ,
        "STREAMPROC_KAFKA_STATE": str(tmp_path_factory.mktemp("kafka") / "state"),
        "PYTHON": sys.executable,
    }
    started = _kafka_sh("start", env, _KAFKA_START_TIMEOUT_S)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines:
        _kafka_sh("stop", env, _KAFKA_STOP_TIMEOUT_S)
        pytest.fail(
            f"scripts/kafka.sh start failed (exit {started.returncode}):\n{started.stderr}",
            pytrace=False,
        )
    try:
        yield lines[-1]
    finally:
        stopped = _kafka_sh("stop", env, _KAFKA_STOP_TIMEOUT_S)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka.sh stop failed:\n{stopped.stderr}\n")


@pytest.fixture(scope="session")
def tansu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of an embedded Tansu broker for the whole session."""
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedTansu(log_path=log_path) as broker:
        yield broker.bootstrap
