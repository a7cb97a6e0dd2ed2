"""A streamproc worker (or gate) in a child process: how the demo and the end-to-end tests
run one.

A separate process is what production runs too (the worker owns its event loop and signal
handlers), and it lets a test kill a worker the way a crash would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from streamproc.config import Settings
from streamproc.kafka.brokers._process_group import stop_process_group

__all__ = ["WorkerProcess"]


class WorkerProcess:
    """``python -m streamproc worker`` (or ``command``, e.g. ``("gate", "serve")``) with the
    given settings; logs go to ``log_path``."""

    def __init__(
        self, settings: Settings, log_path: Path, *, command: Sequence[str] = ("worker",)
    ) -> None:
        self._settings = settings
        self._command = tuple(command)
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> Self:
        env = {**os.environ, **self._settings.to_env()}
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "streamproc", *self._command],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopping it never leaves children
        )
        return self

    @property
    def pid(self) -> int | None:
        """The worker's process id (also its process group id) while it runs."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait(self, timeout_s: float) -> int | None:
        """The exit code once the worker ends by itself, or None if it still runs."""
        if self._process is None:
            return None
        try:
            return self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (the loops finish their batch and leave their groups), then SIGKILL if stuck."""
        return self._signal(signal.SIGTERM, timeout_s)

    def kill(self) -> int | None:
        """Die like a crash would: no goodbye to the group, no final commit."""
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: signal.Signals, timeout_s: float) -> int | None:
        process = self._process
        if process is None:
            return None
        stop_process_group(process, sig, timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None
        self._process = None
        return process.returncode

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
