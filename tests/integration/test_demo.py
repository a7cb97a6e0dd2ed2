"""The README's main command, run as a user would: it must finish on its own, print the
verdict stream and the closed windows, and leave no broker or worker behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from streamproc.samples import load_sample_answers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.timeout(480)
def test_demo_runs_to_completion_and_cleans_up() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamproc", "demo", "--timeout", "280"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    answers = load_sample_answers()
    verdict_lines = [line for line in out.splitlines() if line.startswith("verdict ")]
    assert len(verdict_lines) == len(answers)
    assert f"all {len(answers)} answers judged" in out
    assert "bad_json" in out, "the malformed event is reported as a dead letter"

    windows = [line for line in out.splitlines() if line.startswith("WINDOW ")]
    # tenant, assistant, model, time range -> (revision, answers): a late event revises
    latest: dict[tuple[str, ...], tuple[int, int]] = {}
    for line in windows:
        fields = line.split()
        key = tuple(fields[1:5])
        revision = int(fields[-1])
        answers_in = int(re.findall(r"\sanswers\s+(\d+)\s+answered", line)[0])
        if key not in latest or revision > latest[key][0]:
            latest[key] = (revision, answers_in)
    counted = sum(answers_in for _, answers_in in latest.values())
    assert counted == len(answers), "every answer is counted in exactly one window"
    assert any("sap-helpdesk" in line for line in windows)

    pids = [int(pid) for pid in re.findall(r"(?:broker|worker) pid (\d+)", out)]
    assert len(pids) == 2
    assert not [pid for pid in pids if _alive(pid)], "demo left a process running"
