"""Stopping a child that runs in its own process group, without leaving anything behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

__all__ = ["stop_process_group"]


def stop_process_group(
    process: subprocess.Popen[bytes], first: signal.Signals, grace_s: float
) -> int:
    """Send ``first`` to the whole group (pgid == pid: started with a new session), wait
    ``grace_s``, then SIGKILL whatever is left of the group. Returns the exit code."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    # the group may outlive its leader: kill the rest too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()
