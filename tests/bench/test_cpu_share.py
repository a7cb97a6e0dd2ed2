"""The CPU accounting the gate benchmark reports per level."""

from __future__ import annotations

import os
import sys
import time

import pytest

from bench.cpu_share import CpuSnapshot, cores_used, machine_busy_s, process_cpu_s, snapshot

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_busy_process_is_seen_using_about_one_core() -> None:
    wall, cpu = time.monotonic(), time.process_time()
    before = snapshot(os.getpid())
    _spin(0.3)
    used = cores_used(before, snapshot(os.getpid()))
    # What the process really got, by its own clocks: about one core on an idle machine,
    # less where other processes share the cores (CI runs suites side by side).
    got = (time.process_time() - cpu) / (time.monotonic() - wall)
    ticks = 0.02 / 0.3  # two 10 ms ticks over the 0.3 s spin
    # The same process, read twice a moment apart in 10 ms ticks: equal within two ticks.
    assert used["service"] == pytest.approx(used["load_generator"], abs=ticks)
    assert used["service"] is not None and 0 < used["service"] <= 1.1
    assert used["service"] == pytest.approx(got, abs=ticks)
    assert used["machine"] is not None and used["machine"] >= used["service"] - ticks


def test_what_cannot_be_read_is_none_not_zero() -> None:
    assert process_cpu_s(None) is None
    assert process_cpu_s(2**22 + 12345) is None  # no such process
    assert machine_busy_s() is not None
    gone = cores_used(CpuSnapshot(0.0, None, 1.0, 2.0), CpuSnapshot(2.0, None, 2.0, 5.0))
    assert gone == {"service": None, "load_generator": 0.5, "rest": None, "machine": 1.5}


def test_the_rest_is_what_the_machine_used_beyond_the_two() -> None:
    used = cores_used(CpuSnapshot(10.0, 1.0, 0.0, 5.0), CpuSnapshot(20.0, 5.0, 1.0, 15.0))
    assert used == pytest.approx(
        {"service": 0.4, "load_generator": 0.1, "rest": 0.5, "machine": 1.0}
    )
