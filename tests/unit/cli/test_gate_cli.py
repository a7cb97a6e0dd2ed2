"""``streamproc gate``: the command lists its actions, ``token`` prints a token once and the
``[[caller]]`` entry the gate then accepts it by, and ``serve`` refuses bad tokens or TLS
settings before anything starts, else hands its settings to the gate process (a stand-in
here: no server is started)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from streamproc.cli import gate_process
from streamproc.cli.gate import EXIT_BAD_SETTINGS
from streamproc.cli.main import main
from streamproc.config import Settings
from streamproc.gate.http.auth import Callers


def test_help_lists_serve_and_token(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["gate", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "serve" in out and "token" in out
    assert main(["gate"]) == 2  # the bare command prints the same help
    out = capsys.readouterr().out
    assert "serve" in out and "token" in out


def test_the_top_level_help_lists_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "gate" in capsys.readouterr().out


def test_token_prints_a_token_and_the_caller_entry_that_accepts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["gate", "token", "--name", "assistant-eu", "--tenant", "acme", "--tenant", "g"]) == 0
    )
    captured = capsys.readouterr()
    token, _, stanza = captured.out.partition("\n")
    assert token and " " not in token
    document = tomllib.loads(stanza)
    assert set(document) == {"caller"}
    (caller,) = document["caller"]
    assert caller == {
        "name": "assistant-eu",
        "tenants": ["acme", "g"],
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    assert token not in stanza, "only the hash goes into the file"
    assert "STREAMPROC_GATE__TOKENS_FILE" in captured.err

    tokens = tmp_path / "tokens.toml"
    tokens.write_text(stanza)
    found = Callers.load(tokens).authenticate(token)
    assert found is not None and found.name == "assistant-eu"
    assert found.may_see("acme") and not found.may_see("other")


def test_every_token_is_new(capsys: pytest.CaptureFixture[str]) -> None:
    seen = set()
    for _ in range(3):
        assert main(["gate", "token", "--name", "a", "--tenant", "t"]) == 0
        seen.add(capsys.readouterr().out.partition("\n")[0])
    assert len(seen) == 3


def test_token_needs_a_name_and_a_tenant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["gate", "token", "--name", "a"])
    assert exited.value.code == 2
    assert "--tenant" in capsys.readouterr().err


def test_serve_refuses_a_malformed_tokens_file_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[caller]]\nname = "bot"\ntenants = ["acme"]\ntoken = "in clear"\n')
    assert main(["gate", "serve", "--tokens-file", str(tokens)]) == EXIT_BAD_SETTINGS
    error = capsys.readouterr().err
    assert error.startswith("streamproc gate serve:")
    assert "caller #1" in error and "in clear" not in error


def test_serve_refuses_a_missing_tokens_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["gate", "serve", "--tokens-file", str(missing)]) == EXIT_BAD_SETTINGS
    assert "cannot read the tokens file" in capsys.readouterr().err


def test_serve_refuses_a_certificate_without_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMPROC_GATE__TLS_CERT", str(tmp_path / "cert.pem"))
    assert main(["gate", "serve"]) == EXIT_BAD_SETTINGS
    assert "STREAMPROC_GATE__TLS_KEY" in capsys.readouterr().err


def test_serve_runs_the_gate_process_with_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[Settings] = []

    def fake_main(settings: Settings) -> None:
        given.append(settings)
        raise SystemExit(0)

    monkeypatch.setattr(gate_process, "main", fake_main)
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("")  # valid: no callers yet
    with pytest.raises(SystemExit) as exited:
        main(["gate", "serve", "--port", "0", "--host", "0.0.0.0", "--tokens-file", str(tokens)])
    assert exited.value.code == 0
    (settings,) = given
    assert (settings.gate.host, settings.gate.port) == ("0.0.0.0", 0)
    assert settings.gate.tokens_file == tokens
    assert capsys.readouterr().err == ""  # a tokens file was given: no warning


def test_serve_without_a_tokens_file_warns_that_every_request_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMPROC_GATE__TOKENS_FILE", raising=False)
    monkeypatch.setattr(gate_process, "main", lambda settings: None)
    main(["gate", "serve"])
    assert "every request will be refused (401)" in capsys.readouterr().err
