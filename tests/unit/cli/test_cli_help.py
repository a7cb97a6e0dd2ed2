"""Every subcommand's ``--help``: it works, it names variables rather than Python paths,
an option that writes a file or folder is spelled ``--output``/``-o``, and each command
shows only its own options."""

from __future__ import annotations

import argparse
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.cli.main import _parser, main
from streamproc.config import setting_variables

OTHER_OUTPUT_SPELLINGS = {
    "--out",
    "--out-dir",
    "--output-dir",
    "--outfile",
    "--output-file",
    "--dest",
    "--to",
    "--dir",
    "--report",
}
WRITES_BUT_NOT_AN_OUTPUT = {
    ("calibrate", "--models-dir"): "the models folder a calibrator is added to (and read from)",
}


def _commands() -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    """(argv, parser) of every command and subcommand."""
    pending: list[tuple[list[str], argparse.ArgumentParser]] = [([], _parser())]
    while pending:
        argv, parser = pending.pop(0)
        yield argv, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending += [([*argv, name], sub) for name, sub in action.choices.items()]


COMMANDS = [argv for argv, _ in _commands()]


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _python_path(token: str) -> bool:
    """``settings.audit.store_url``, ``audit.store_url`` (a setting's path) or a module
    path such as ``streamproc.gate.client``."""
    settings_paths = {
        each.name.removeprefix("STREAMPROC_").lower().replace("__", ".")
        for each in setting_variables()
    }
    first, _, rest = token.partition(".")
    if first == "settings" and rest.split(".")[0] in {p.split(".")[0] for p in settings_paths}:
        return True
    if first == "args" or token in settings_paths:
        return True
    if token.startswith("streamproc."):
        try:
            return importlib.util.find_spec(token) is not None
        except ModuleNotFoundError:
            return False
    return False


def test_every_command_is_covered() -> None:
    names = {" ".join(argv) for argv in COMMANDS}
    assert {"worker", "eval check", "eval benchmark", "docs", "review export"} <= names


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv) or "streamproc")
def test_help_exits_0_and_names_no_python_path(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(argv, capsys)
    assert text.startswith("usage: streamproc")
    tokens = re.findall(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+", text)
    assert [token for token in tokens if _python_path(token)] == []


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv) or "streamproc")
def test_an_output_option_is_spelled_output(argv: list[str]) -> None:
    parser = dict((" ".join(each), parser) for each, parser in _commands())[" ".join(argv)]
    for action in parser._actions:
        spellings = set(action.option_strings)
        assert not spellings & OTHER_OUTPUT_SPELLINGS, (argv, action.option_strings)
        if "-o" in spellings:
            assert "--output" in spellings, (argv, action.option_strings)
        writes = re.search(r"\bwrit(e|es|ten)\b", action.help or "")
        if writes and "--output" not in spellings and action.option_strings:
            assert (" ".join(argv), action.option_strings[0]) in WRITES_BUT_NOT_AN_OUTPUT, (
                argv,
                action.option_strings,
            )


@pytest.mark.parametrize(
    "argv",
    [
        ["schemas", "write"],
        ["docs", "write"],
        ["eval", "check"],
        ["eval", "agree"],
        ["eval", "score"],
        ["eval", "benchmark"],
        ["review", "export"],
        ["audit", "export"],
        ["audit", "checkpoints"],
    ],
    ids=" ".join,
)
def test_commands_that_write_take_output_and_o(argv: list[str], tmp_path: Path) -> None:
    for spelling in ("--output", "-o"):
        args = _parser().parse_args([*argv, spelling, str(tmp_path / "out")])
        written = {str(vars(args).get(name)) for name in ("output", "report", "dir")}
        assert str(tmp_path / "out") in written


def test_eval_check_help_shows_only_its_own_options(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["eval", "check"], capsys)
    for own in ("--judge", "--granularity", "--cases", "--notes", "--output"):
        assert own in text
    for other in ("--penalty", "--data", "--split", "--dump", "--resamples", "--limit"):
        assert other not in text


def test_eval_benchmark_help_shows_only_its_own_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(["eval", "benchmark"], capsys)
    assert "--data" in text and "--split" in text and "--output" in text
    assert "--penalty" not in text and "--cases" not in text


def test_eval_score_keeps_its_penalty(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["eval", "score", "--penalty", "3", "--judge", "rules"])
    assert (args.what, args.penalty, args.judge) == ("score", 3.0, "rules")


def test_worker_help_names_its_settings_and_where_they_are_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = " ".join(_help(["worker"], capsys).split())
    for group in ("WORKER", "JUDGE", "WINDOW", "TOPICS", "ALERTS", "AUDIT"):
        assert f"STREAMPROC_{group}__*" in text
    assert "'streamproc settings worker'" in text
    assert "docs/reference/settings.md" in text


@pytest.mark.parametrize(
    ("token", "python"),
    [
        ("settings.audit.store_url", True),
        ("audit.store_url", True),
        ("review.queue_topic", True),
        ("streamproc.gate.client", True),
        ("settings.md", False),
        ("groundedness.alerts", False),
        ("seed_notes.json", False),
    ],
)
def test_what_counts_as_a_python_path(token: str, python: bool) -> None:
    assert _python_path(token) is python
