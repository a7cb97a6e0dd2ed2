"""The worker processes under test: their settings for one phase, when they are ready
(every judge partition owned exactly once, read from their JSON logs), whether they are
still alive, their peak memory, and waiting until what was sent is decided."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from bench._broker import run_topics
from bench._log import log
from bench._stream_reader import VerdictReader
from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings

__all__ = [
    "READY_TIMEOUT_S",
    "STALL_S",
    "check_alive",
    "judge_assignment",
    "wait_ready",
    "wait_settled",
    "worker_peak_rss_mib",
    "worker_settings",
]

READY_TIMEOUT_S = 180.0
STALL_S = 60.0
"""A phase gives up waiting once no verdict has come for this long."""


def worker_settings(
    bootstrap: str, app_id: str, judge: str, threads: int, *, judge_process: bool = True
) -> Settings:
    """Product defaults, with every topic unique to this phase and ``threads`` ONNX
    intra-op threads per worker; JSON logs at INFO whatever the environment says, since
    :func:`wait_ready` reads the partition assignments from them. ``judge_process``:
    ``worker.judge_process`` (``--judge-in-thread`` measures the judge in a thread)."""
    return Settings(
        app_id=app_id,
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        log_level="INFO",
        **run_topics(app_id),
        judge={"name": judge, "inference": {"intra_op_threads": threads}},
        worker={"judge_process": judge_process},
    )


def judge_assignment(log_path: Path) -> list[str]:
    """The judge partitions a worker owns now, from its JSON log (the last
    ``partitions_assigned`` / ``partitions_revoked`` of its judge consumer)."""
    owned: list[str] = []
    if not log_path.exists():
        return owned
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("consumer") != "judge":
            continue
        if entry.get("event") == "partitions_assigned":
            owned = [str(p) for p in entry.get("partitions", [])]
        elif entry.get("event") == "partitions_revoked":
            owned = []
    return owned


async def wait_ready(workers: Sequence[WorkerProcess], partitions: int) -> None:
    """Until every worker owns judge partitions and together they own each exactly once."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        check_alive(workers)
        owned = [judge_assignment(w.log_path) for w in workers]
        flat = [p for each in owned for p in each]
        if all(owned) and len(flat) == len(set(flat)) == partitions:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"workers not ready after {READY_TIMEOUT_S:g} s:\n{workers[0].log_tail()}")


def worker_peak_rss_mib(worker: WorkerProcess) -> float | None:
    """Peak RSS (VmHWM) of a worker plus its judge's process (``judge_pid`` of its
    ``worker_starting`` log line), in MiB; None where /proc cannot tell."""
    pids = [worker.pid]
    for line in worker.log_path.read_text(errors="replace").splitlines():
        if '"worker_starting"' in line:
            with contextlib.suppress(ValueError, AttributeError):
                pids.append(json.loads(line).get("judge_pid"))
    total = 0.0
    for pid in pids:
        if pid is None:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
        total += int(kib) / 1024
    return total


def check_alive(workers: Sequence[WorkerProcess]) -> None:
    for worker in workers:
        if not worker.running:
            raise RuntimeError(f"a worker exited:\n{worker.log_tail()}")


async def wait_settled(
    reader: VerdictReader, ids: set[str], workers: Sequence[WorkerProcess]
) -> None:
    """Until every answer in ``ids`` has a verdict or a dead letter, or none came for
    ``STALL_S`` (what is left is reported missing)."""
    done, progress_at = -1, time.monotonic()
    while True:
        check_alive(workers)
        now_done = reader.settled(ids)
        if now_done == len(ids):
            return
        if now_done != done:
            done, progress_at = now_done, time.monotonic()
        elif time.monotonic() - progress_at > STALL_S:
            log(f"  {len(ids) - done} answers still undecided after {STALL_S:g} s of silence")
            return
        await asyncio.sleep(0.1)
