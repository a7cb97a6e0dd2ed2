"""A broker that is not there: each entry point that starts Kafka clients gives up after
``STREAMPROC_BROKER_CONNECT_TIMEOUT_S`` with one line saying what it tried, and exit code 8.

Before: 29 warnings and 30 aiokafka errors over a minute, then a 33-line traceback and
exit code 1. The real command runs here, against a port that refuses connections.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.kafka.security import EXIT_BROKER_UNREACHABLE

GIVE_UP_S = 3


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but not listening: connections to it are refused, and no other
    process can take it while the test runs."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.mark.parametrize(
    ("command", "settings"),
    [
        (("worker",), {}),
        (("gate", "serve"), {"STREAMPROC_GATE__PUBLISH": "true", "STREAMPROC_GATE__PORT": "0"}),
        (("audit-sink",), {}),
    ],
    ids=["worker", "gate-serve", "audit-sink"],
)
def test_an_unreachable_broker_is_one_line_and_exit_code_8(
    command: tuple[str, ...], settings: dict[str, str], closed_port: int, tmp_path: Path
) -> None:
    bootstrap = f"127.0.0.1:{closed_port}"
    env = {key: value for key, value in os.environ.items() if not key.startswith("STREAMPROC_")}
    env |= {
        "STREAMPROC_BROKER_URL": f"kafka://{bootstrap}",
        "STREAMPROC_BROKER_CONNECT_TIMEOUT_S": str(GIVE_UP_S),
        "STREAMPROC_JUDGE__NAME": "rules",
        "STREAMPROC_AUDIT__STORE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        **settings,
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streamproc", *command],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    took_s = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_BROKER_UNREACHABLE, output
    assert "Traceback" not in output
    lines = output.splitlines()
    assert len(lines) <= 4, output  # what it tries, the give-up line, at most a warning more
    (gave_up,) = [json.loads(line) for line in lines if "broker_unreachable" in line]
    assert gave_up["level"] == "error"
    assert gave_up["bootstrap_servers"] == bootstrap
    assert gave_up["security_protocol"] == "PLAINTEXT"
    assert gave_up["exit_code"] == EXIT_BROKER_UNREACHABLE
    assert "refused" in gave_up["reason"].lower() or "failed" in gave_up["reason"].lower()
    assert GIVE_UP_S <= gave_up["waited_s"] < GIVE_UP_S + 5
    assert took_s < GIVE_UP_S + 60  # the judge loads first; no minute of retries after
