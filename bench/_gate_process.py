"""The gate under test as a process of its own: its environment (port, tokens file,
publishing, topics of its own), starting and stopping it, and its peak memory. Changes
when the gate's command line or settings do."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from bench._broker import delete_topics, run_topics
from bench._log import log
from streamproc.config import Settings
from streamproc.kafka.brokers._process_group import stop_process_group

__all__ = [
    "BROKER_PATHS",
    "PATHS",
    "Gate",
    "GateProcess",
    "free_port",
    "gate_env",
    "gate_process",
    "peak_rss_mib",
    "topic_settings",
    "write_tokens",
]

PATHS = ("http", "http-publish", "kafka")
BROKER_PATHS = frozenset({"http-publish", "kafka"})


def write_tokens(path: Path, tenants: Sequence[str]) -> str:
    """A tokens file with one caller for ``tenants``; the token itself is returned (the
    file keeps only its sha256, as a deployment's would)."""
    token = secrets.token_urlsafe(24)
    digest = hashlib.sha256(token.encode()).hexdigest()
    names = ", ".join(json.dumps(t) for t in tenants)
    path.write_text(
        f'[[caller]]\nname = "bench"\ntenants = [{names}]\ntoken_sha256 = "{digest}"\n',
        encoding="utf-8",
    )
    return token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def peak_rss_mib(pid: int | None) -> float | None:
    """``VmHWM`` of ``pid`` in MiB; None where /proc cannot tell."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return None


def gate_env(
    *, port: int, tokens_file: Path, app_id: str, path: str, bootstrap: str | None
) -> dict[str, str]:
    """The gate's ``STREAMPROC_*`` variables: product defaults (and whatever the
    environment sets, e.g. ``STREAMPROC_JUDGE__NAME``) apart from its port, the tokens
    file, publishing (off on the plain ``http`` path), and, with a broker, every topic
    named after ``app_id``."""
    publish = path in BROKER_PATHS
    env = {
        "STREAMPROC_APP_ID": app_id,
        "STREAMPROC_GATE__HOST": "127.0.0.1",
        "STREAMPROC_GATE__PORT": str(port),
        "STREAMPROC_GATE__TOKENS_FILE": str(tokens_file),
        "STREAMPROC_GATE__PUBLISH": "true" if publish else "false",
        "STREAMPROC_GATE__KAFKA_REQUESTS": "true" if path == "kafka" else "false",
        "STREAMPROC_LOG_JSON": "true",
    }
    if publish and bootstrap is not None:
        settings = topic_settings(app_id, bootstrap)
        env["STREAMPROC_BROKER_URL"] = settings.broker_url
        named = {k: v for k, v in settings.to_env().items() if v.startswith(f"{app_id}.")}
        env.update(named)
    return env


def topic_settings(app_id: str, bootstrap: str) -> Settings:
    """Settings whose every topic (the gate's request and reply topics too) is named after
    ``app_id``, so a run on a shared broker meets no other run."""
    return Settings(app_id=app_id, broker_url=f"kafka://{bootstrap}", **run_topics(app_id))


class GateProcess:
    """``python -m streamproc gate serve`` in its own process group, logging to a file."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self._env = {**os.environ, **env}
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> GateProcess:
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "streamproc", "gate", "serve"],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> int | None:
        if self._process is None:
            return None
        code = stop_process_group(self._process, signal.SIGTERM, 20.0)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Gate:
    """Where the gate under test is and what to read its memory from."""

    url: str
    token: str
    pid: int | None
    alive: Callable[[], bool] = field(default=lambda: True)


@contextlib.contextmanager
def gate_process(
    path: str, bootstrap: str | None, log_dir: Path
) -> Iterator[tuple[Gate, Settings | None]]:
    """A fresh gate for one path (and topics of its own when it publishes)."""
    app_id = f"bench-gate-{uuid.uuid4().hex[:8]}"
    port = free_port()
    tokens = log_dir / f"{app_id}.tokens.toml"
    token = write_tokens(tokens, ["demo"])
    publish = path in BROKER_PATHS
    settings = topic_settings(app_id, bootstrap) if publish and bootstrap else None
    if settings is not None:
        asyncio.run(_prepare(settings))
    env = gate_env(port=port, tokens_file=tokens, app_id=app_id, path=path, bootstrap=bootstrap)
    process = GateProcess(env, log_dir / f"{app_id}.log").start()
    gate = Gate(f"http://127.0.0.1:{port}", token, process.pid, lambda: process.running)
    try:
        yield gate, settings
    except Exception:
        log(process.log_tail())
        raise
    finally:
        process.stop()
        if settings is not None:
            asyncio.run(delete_topics(settings))


async def _prepare(settings: Settings) -> None:
    from streamproc.wiring import prepare_topics

    await prepare_topics(settings)
    await _ensure_gate_topic(settings)


async def _ensure_gate_topic(settings: Settings) -> None:
    """The request topic, in case the topic list does not hold it (yet)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics(
                [NewTopic(settings.gate.requests_topic, settings.topics.partitions, 1)]
            )
    finally:
        await admin.close()
