"""``streamproc review``: a tokens file that cannot be read stops ``serve`` before it
touches the broker, with the reason; the bare command prints its actions."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamproc.cli.main import main
from streamproc.cli.review import EXIT_BAD_TOKENS_FILE


def test_serve_refuses_a_malformed_tokens_file_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[reviewer]]\nname = "alice"\ntenants = ["acme"]\ntoken = "in clear"\n')
    assert main(["review", "serve", "--tokens-file", str(tokens)]) == EXIT_BAD_TOKENS_FILE
    error = capsys.readouterr().err
    assert "reviewer #1" in error and "in clear" not in error


def test_serve_refuses_a_missing_tokens_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["review", "serve", "--tokens-file", str(missing)]) == EXIT_BAD_TOKENS_FILE
    assert "cannot read the tokens file" in capsys.readouterr().err


def test_the_bare_command_lists_its_actions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review"]) == 2
    out = capsys.readouterr().out
    assert "serve" in out and "token" in out
    assert "import" in out and "export" in out


def test_import_of_a_bad_file_names_the_line_and_publishes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unreachable broker: a bad file must be refused before any connection is tried.
    monkeypatch.setenv("STREAMPROC_BROKER_URL", "kafka://127.0.0.1:1")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"answer_id": "a1", "tenant": "acme"}\n')
    assert main(["review", "import", str(labels)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("streamproc review import:") and "line 1" in error
