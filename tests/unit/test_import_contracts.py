"""The dependency rules are import-linter contracts (pyproject.toml, [tool.importlinter]),
run by scripts/lint.sh. These tests run the same contracts: they hold on the package, and a
wrong-way import planted in a copy of it is reported."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(project / "pyproject.toml")],
        cwd=project,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_contract_holds_on_the_package() -> None:
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "BROKEN" not in run.stdout


def test_wrong_way_imports_planted_in_a_copy_are_reported(tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "streamproc", tmp_path / "streamproc", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    plants = {
        "streamproc/judge/engine.py": "from streamproc.config import Settings  # planted\n",
        "streamproc/verdicts/stage.py": "import aiokafka  # planted\n",
        "streamproc/monitor/dedup.py": "from streamproc.review.labels import loop  # planted\n",
        "streamproc/contracts/events.py": (
            "from streamproc.contracts import label_events  # planted\n"
        ),
    }
    for relative, line in plants.items():
        path = tmp_path / relative
        path.write_text(path.read_text(encoding="utf-8") + "\n" + line, encoding="utf-8")
    run = _lint(tmp_path)
    assert run.returncode == 1
    for needle in (
        "streamproc.judge.engine -> streamproc.config",
        "streamproc.verdicts.stage -> aiokafka",
        "streamproc.monitor.dedup -> streamproc.review.labels",
        "streamproc.contracts.events -> streamproc.contracts.label_events",
    ):
        assert needle in run.stdout, needle
