"""Who used the cores during a measurement: a process's CPU seconds and the machine's
busy seconds from ``/proc``, read before and after, as cores used on average.

On a small machine the broker, the service and the load generator share the cores; a
latency that grows with the transport is often CPU taken from the service, and this says
by whom. Linux only: elsewhere every figure is None.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuSnapshot", "cores_used", "process_cpu_s", "snapshot"]

_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds ``pid`` has used (its threads included)."""
    if pid is None:
        return None
    try:
        # The command name may hold spaces and parentheses: the fields follow the last ")".
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK_S
    except (OSError, IndexError, ValueError):
        return None


def machine_busy_s() -> float | None:
    """CPU seconds all cores have spent on anything but idling or waiting for I/O."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(ticks) < 5:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) * _TICK_S


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    at: float
    """``time.monotonic()``."""
    service: float | None
    load_generator: float | None
    machine: float | None


def snapshot(service_pid: int | None) -> CpuSnapshot:
    """The service's, this process's and the machine's CPU seconds now."""
    return CpuSnapshot(
        time.monotonic(), process_cpu_s(service_pid), process_cpu_s(os.getpid()), machine_busy_s()
    )


def cores_used(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float | None]:
    """Cores used on average between two snapshots by the service, the load generator,
    the rest of the machine (a broker on it, mostly) and all of it together."""
    span = after.at - before.at

    def rate(start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None or span <= 0 else (end - start) / span

    service = rate(before.service, after.service)
    generator = rate(before.load_generator, after.load_generator)
    machine = rate(before.machine, after.machine)
    rest = (
        None
        if machine is None or service is None or generator is None
        else max(0.0, machine - service - generator)
    )
    return {"service": service, "load_generator": generator, "rest": rest, "machine": machine}
