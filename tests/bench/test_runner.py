"""``python -m bench NAME``: one runner for every benchmark, each module's ``main(argv)``
reached by its name, and the command a report records being the one that ran it."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bench import command_line
from bench.__main__ import BENCHMARKS, main

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_benchmark_is_a_module_with_main_taking_its_arguments() -> None:
    assert set(BENCHMARKS) == {
        "judge", "cost", "embedding-cache", "stream", "windows", "tracing", "gate",
        "gate-overhead", "kafka-round-trip", "gate-stream",
    }  # fmt: skip
    for name, (module_name, _) in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        assert list(inspect.signature(module.main).parameters) == ["argv"], name
        assert (ROOT / (module_name.replace(".", "/") + ".py")).is_file()


def test_no_benchmark_is_left_in_scripts() -> None:
    left = sorted(p.name for p in (ROOT / "scripts").glob("*.py") if "bench" in p.name)
    assert left == [], left


def test_the_runner_lists_the_benchmarks_and_refuses_an_unknown_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in BENCHMARKS)
    assert main([]) == 2
    assert main(["nonsense"]) == 2
    assert "no benchmark 'nonsense'" in capsys.readouterr().err


def test_a_benchmarks_help_names_the_runner() -> None:
    done = _bench("windows", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m bench windows ")
    assert "--tumbling-only" in done.stdout


def test_a_benchmark_runs_through_the_runner() -> None:
    done = _bench(
        "windows", "--keys", "20", "--shapes", "sparse", "--answers", "200", "--span-s", "30",
        "--tumbling-only",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sparse, 20 keys, 30 s, tumbling only" in done.stdout


def test_the_recorded_command_is_the_runner_and_its_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python = os.path.relpath(sys.executable)
    python = sys.executable if python.startswith("..") else python
    runner = types.ModuleType("__main__")
    runner.__spec__ = importlib.machinery.ModuleSpec("bench.__main__", None)
    monkeypatch.setitem(sys.modules, "__main__", runner)
    monkeypatch.setattr(sys, "argv", ["/repo/bench/__main__.py", "gate", "--paths", "http x"])
    assert command_line() == f"{python} -m bench gate --paths 'http x'"
    script = types.ModuleType("__main__")
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    monkeypatch.setattr(sys, "argv", ["scripts/replay_reviews.py", "--seed", "1"])
    assert command_line() == f"{python} scripts/replay_reviews.py --seed 1"
