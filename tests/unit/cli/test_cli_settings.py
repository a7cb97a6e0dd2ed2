"""A configuration mistake is answered in one line naming the variable, with exit code 2,
by every command; help and ``--version`` say where the settings are."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from streamproc.cli.main import EXIT_CONFIGURATION, _parser, main
from streamproc.config import NOT_SETTINGS, setting_variables

REPO = Path(__file__).resolve().parents[3]
ENTRY_POINTS = [
    ["worker"],
    ["gate", "serve"],
    ["review", "serve"],
    ["audit-sink"],
    ["demo", "--timeout", "1"],
    ["audit", "show", "some-answer"],
    ["audit", "find"],
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets: the caller's own STREAMPROC_* would add lines."""
    for name in list(os.environ):
        if name.upper().startswith("STREAMPROC_"):
            monkeypatch.delenv(name)


def _streamproc(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMPROC_")}
    return subprocess.run(
        [sys.executable, "-m", "streamproc", *argv],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("argv", ENTRY_POINTS, ids=" ".join)
def test_an_unknown_variable_is_refused_by_every_command(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAMPROC_BROKR_URL", "kafka://kafka:9092")
    assert main(argv) == EXIT_CONFIGURATION
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "streamproc: configuration error: STREAMPROC_BROKR_URL is not a setting "
        "(did you mean STREAMPROC_BROKER_URL?)"
    ]


def test_an_unknown_variable_stops_the_worker_process_in_one_line() -> None:
    done = _streamproc("worker", STREAMPROC_WORKER__BATCH_MAXX="3")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "streamproc: configuration error: STREAMPROC_WORKER__BATCH_MAXX is not a setting "
        "(did you mean STREAMPROC_WORKER__BATCH_MAX?)"
    ]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_bad_value_stops_the_worker_process_in_one_line_naming_the_variable() -> None:
    done = _streamproc("worker", STREAMPROC_WORKER__BATCH_MAX="lots")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("streamproc: configuration error: STREAMPROC_WORKER__BATCH_MAX: ")
    assert "integer" in line
    assert "worker.batch_max" not in line and "lots" not in line, "no Python path, no value"
    assert "Traceback" not in done.stdout + done.stderr


def test_each_bad_value_gets_its_own_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAMPROC_WORKER__BATCH_MAX", "lots")
    monkeypatch.setenv("STREAMPROC_WINDOW__SIZE_S", "-1")
    assert main(["gate", "serve"]) == EXIT_CONFIGURATION
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert {line.split(": ")[2] for line in lines} == {
        "STREAMPROC_WORKER__BATCH_MAX",
        "STREAMPROC_WINDOW__SIZE_S",
    }


def test_a_bad_value_inside_a_json_setting_names_the_variable_and_the_place(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAMPROC_GATE__POLICIES", '[{"tenant": "acme", "policy": "maybe"}]')
    assert main(["worker"]) == EXIT_CONFIGURATION
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "streamproc: configuration error: STREAMPROC_GATE__POLICIES (at 0.policy): "
    )


def test_every_streamproc_variable_the_repository_sets_is_a_setting_or_allowed() -> None:
    """Scripts, deployments, docs and test fixtures must not trip the unknown-name check
    (integration tests start processes with the test's own environment)."""
    known = {each.name for each in setting_variables()} | NOT_SETTINGS
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    unknown: dict[str, str] = {}
    for path in tracked:
        if path == "CHANGELOG.md":  # history names settings that are gone
            continue
        if path.endswith(".py") and not path.endswith("conftest.py"):
            continue  # code names variables as data (tests misspell some on purpose)
        file = REPO / path
        if not file.is_file():
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in re.findall(r"STREAMPROC_[A-Z0-9_]*[A-Z0-9]", text):
            if name not in known:
                unknown.setdefault(name, path)
    assert unknown == {}


def test_variables_that_are_not_settings_are_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamproc.config import Settings

    for name in NOT_SETTINGS:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("STREAMPROC_WORKER__BATCH_MAX", "5")
    assert Settings().worker.batch_max == 5


def test_version_prints_the_package_version() -> None:
    done = _streamproc("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"streamproc {version('streamproc')}"


@pytest.mark.parametrize(
    ("argv", "group"),
    [
        (["worker"], "STREAMPROC_WORKER__*"),
        (["gate", "serve"], "STREAMPROC_GATE__*"),
        (["review", "serve"], "STREAMPROC_REVIEW__*"),
        (["audit-sink"], "STREAMPROC_AUDIT__*"),
    ],
    ids=lambda each: " ".join(each) if isinstance(each, list) else each,
)
def test_a_servers_help_points_to_its_settings(
    argv: list[str], group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert group in text
    assert "'streamproc settings' lists every one" in text


def test_no_help_text_names_a_python_path() -> None:
    """Help names variables (STREAMPROC_AUDIT__STORE_URL), never settings.audit.store_url."""
    python_paths = []
    pending = [_parser()]
    while pending:
        parser = pending.pop()
        found = re.findall(r"settings\.(?!md\b)[a-z_]+(?:\.[a-z_]+)*", parser.format_help())
        python_paths += [f"{parser.prog}: {each}" for each in found]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    assert python_paths == []


def test_settings_lists_a_groups_variables_with_type_and_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["settings", "worker"]) == 0
    out = capsys.readouterr().out
    assert "STREAMPROC_WORKER__BATCH_MAX (int, default 32)\n    Most answers" in out
    assert all(line.startswith(("STREAMPROC_WORKER__", "    ")) for line in out.splitlines())


def test_settings_lists_every_variable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["settings"]) == 0
    listed = set(re.findall(r"^(STREAMPROC_\S+) \(", capsys.readouterr().out, re.MULTILINE))
    values = {each.name for each in setting_variables() if each.kind != "group"}
    assert listed == values and "STREAMPROC_AUDIT__STORE_URL" in listed


def test_settings_of_an_unknown_group_names_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["settings", "wroker"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "worker" in err
