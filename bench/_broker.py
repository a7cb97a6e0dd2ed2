"""The Kafka broker a benchmark runs against (a given one, or a private one that
``scripts/kafka.sh`` starts and stops) and the topics a run names after itself, so that
a run on a shared broker meets no other run and leaves it as found."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from bench._log import log
from streamproc.config import Settings
from streamproc.kafka.topics import topic_specs
from streamproc.wiring import topic_layout

__all__ = ["KAFKA_SH", "delete_topics", "kafka_broker", "run_topics"]

ROOT = Path(__file__).resolve().parent.parent
KAFKA_SH = ROOT / "scripts" / "kafka.sh"
KAFKA_START_TIMEOUT_S = 600  # the first start on a machine fetches the broker's jars


@contextlib.contextmanager
def kafka_broker(bootstrap: str | None) -> Iterator[tuple[str, str]]:
    """The broker to measure against and where it came from: the given one, or one
    ``scripts/kafka.sh`` starts in a private temporary state dir and stops afterwards."""
    if bootstrap:
        yield bootstrap, f"given ({bootstrap})"
        return
    home = Path(tempfile.mkdtemp(prefix="bench-stream-kafka-"))
    env = {**os.environ, "STREAMPROC_KAFKA_STATE": str(home / "state"), "PYTHON": sys.executable}

    def kafka_sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(KAFKA_SH), command],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=KAFKA_START_TIMEOUT_S,
            check=False,
        )

    log(f"starting a private broker (state in {home})")
    started = kafka_sh("start")
    lines = started.stdout.strip().splitlines()
    try:
        if started.returncode != 0 or not lines:
            raise SystemExit(f"scripts/kafka.sh start failed:\n{started.stderr}")
        yield lines[0], f"private, started by scripts/kafka.sh ({lines[0]})"
    finally:
        stopped = kafka_sh("stop")
        if stopped.returncode != 0:
            log(f"scripts/kafka.sh stop failed:\n{stopped.stderr}")
        shutil.rmtree(home, ignore_errors=True)


def run_topics(app_id: str) -> dict[str, Any]:
    """Settings groups naming every topic a worker writes after ``app_id``, so a run on a
    shared broker meets no other run (and deleting its topics deletes only its own)."""
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return {
        "topics": {name: f"{app_id}.{name}" for name in names},
        "window": {"late_topic": f"{app_id}.late", "hopping_topic": f"{app_id}.hopping"},
        "alerts": {"topic": f"{app_id}.alerts"},
        "audit": {"topic": f"{app_id}.audit"},
        "review": {
            "queue_topic": f"{app_id}.review-queue",
            "labels_topic": f"{app_id}.labels",
        },
        "labels": {
            "deltas_topic": f"{app_id}.label-deltas",
            "accuracy_topic": f"{app_id}.judge-accuracy",
        },
        "gate": {
            "requests_topic": f"{app_id}.gate-requests",
            "replies_topic": f"{app_id}.gate-replies",
        },
    }


async def delete_topics(settings: Settings) -> None:
    """Leave a shared broker as found: this phase's topics go (groups stay; they are
    empty and named after the phase)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_topics([spec.name for spec in topic_specs(topic_layout(settings))])
    except Exception as error:  # noqa: BLE001 - cleanup; the numbers are already taken
        log(f"could not delete the phase's topics: {error!r}")
    finally:
        await admin.close()
