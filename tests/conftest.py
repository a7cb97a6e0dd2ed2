"""The session's Kafka broker, for every test folder that needs one (the integration
tests and the benchmarks' end-to-end tests share it: one broker per pytest process, and
per xdist worker under ``-n``).

``kafka_bootstrap`` is a real Apache Kafka (KRaft) started by ``scripts/kafka.sh`` in a
per-session state dir (so parallel clones and workers never share one), unless
``STREAMPROC_TEST_BOOTSTRAP`` names a broker that is already running. It starts only when
a test asks for it. ``kafka_restart`` restarts it, keeping its data.

Under pytest-xdist every worker collects the suite and the node ids must agree, so a
random token (``new_token()``, 43 URL-safe characters) in a parameter shows in its test's
id as ``<token>``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

KAFKA_SH = Path(__file__).resolve().parents[1] / "scripts" / "kafka.sh"
# First run on a fresh machine resolves ~46 jars from Maven Central before the broker starts.
KAFKA_START_TIMEOUT_S = 600
KAFKA_STOP_TIMEOUT_S = 120
_RANDOM_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """The same id in every xdist worker for a parameter that holds a random token."""
    if isinstance(val, str) and _RANDOM_TOKEN.search(val):
        return _RANDOM_TOKEN.sub("<token>", val).encode("unicode_escape").decode("ascii")
    return None


def kafka_sh(
    command: str, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``scripts/kafka.sh COMMAND`` with ``env``; its result, whatever the exit status."""
    return subprocess.run(
        ["bash", str(KAFKA_SH), command],
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
    started = kafka_sh("start", kafka_env, KAFKA_START_TIMEOUT_S)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines:
        kafka_sh("stop", kafka_env, KAFKA_STOP_TIMEOUT_S)
        pytest.fail(
            f"scripts/kafka.sh start failed (exit {started.returncode}):\n{started.stderr}",
            pytrace=False,
        )
    try:
        yield lines[-1]
    finally:
        stopped = kafka_sh("stop", kafka_env, KAFKA_STOP_TIMEOUT_S)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka.sh stop failed:\n{stopped.stderr}\n")


@pytest.fixture()
def kafka_restart(kafka_bootstrap: str, kafka_env: dict[str, str]) -> Callable[[], str]:
    """Restart the session's broker keeping its data (same port); returns its address."""
    if os.environ.get("STREAMPROC_TEST_BOOTSTRAP", "").strip():
        pytest.skip("STREAMPROC_TEST_BOOTSTRAP names a broker this session cannot restart")

    def restart() -> str:
        done = kafka_sh("restart", kafka_env, KAFKA_START_TIMEOUT_S)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            pytest.fail(f"kafka.sh restart failed:\n{done.stderr}", pytrace=False)
        assert lines[0] == kafka_bootstrap, "the broker came back on another port"
        return lines[0]

    return restart
