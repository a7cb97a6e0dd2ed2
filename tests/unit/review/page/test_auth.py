"""Reviewer tokens: stored hashed, looked up in constant time, each naming its tenants."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from streamproc.cli.main import main
from streamproc.config import Settings
from streamproc.review.page.auth import (
    Reviewers,
    TokensFileError,
    hash_token,
    new_token,
    reviewers_for,
    token_stanza,
)


def write_tokens(path: Path, *entries: tuple[str, list[str], str]) -> Path:
    path.write_text("".join(token_stanza(n, t, tok) for n, t, tok in entries), encoding="utf-8")
    return path


def test_a_token_finds_its_reviewer_and_only_its_tenants(tmp_path: Path) -> None:
    alice, bob = new_token(), new_token()
    path = write_tokens(
        tmp_path / "t.toml", ("alice", ["acme", "globex"], alice), ("bob", ["initech"], bob)
    )
    reviewers = Reviewers.load(path)
    found = reviewers.authenticate(alice)
    assert found is not None and found.name == "alice"
    assert found.may_see("acme") and found.may_see("globex") and not found.may_see("initech")
    assert reviewers.authenticate(bob).name == "bob"  # type: ignore[union-attr]
    assert reviewers.authenticate("not-a-token") is None
    assert reviewers.authenticate("") is None


def test_the_file_keeps_only_the_hash(tmp_path: Path) -> None:
    token = new_token()
    path = write_tokens(tmp_path / "t.toml", ("alice", ["acme"], token))
    text = path.read_text()
    assert token not in text
    entry = tomllib.loads(text)["reviewer"][0]
    assert entry["token_sha256"] == hashlib.sha256(token.encode()).hexdigest() == hash_token(token)
    assert len(token) >= 40 and new_token() != token


def test_names_with_quotes_survive_the_stanza(tmp_path: Path) -> None:
    token = new_token()
    path = write_tokens(tmp_path / "t.toml", ('o"brien\\x', ['tenant "q"'], token))
    reviewer = Reviewers.load(path).authenticate(token)
    assert reviewer is not None
    assert reviewer.name == 'o"brien\\x' and reviewer.tenants == {'tenant "q"'}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not toml [", "not TOML"),
        ('[[reviewer]]\nname = "a"\ntenants = []\ntoken_sha256 = "' + "0" * 64 + '"\n', "tenants"),
        ('[[reviewer]]\nname = "a"\ntenants = ["x"]\ntoken_sha256 = "abc"\n', "token_sha256"),
        ('[[reviewer]]\nname = "a"\ntenants = ["x"]\ntoken = "clear"\n', "reviewer #1"),
        ("[other]\nx = 1\n", "unknown tables"),
    ],
)
def test_a_malformed_file_is_refused_with_the_reason(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(TokensFileError, match=problem):
        Reviewers.load(path)


def test_a_reviewer_named_twice_is_refused(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "t.toml", ("a", ["x"], new_token()), ("a", ["y"], new_token()))
    with pytest.raises(TokensFileError, match="named twice: a"):
        Reviewers.load(path)


def test_reviewers_for_reads_the_settings_file(tmp_path: Path) -> None:
    assert reviewers_for(Settings().review) is None
    token = new_token()
    path = write_tokens(tmp_path / "t.toml", ("alice", ["acme"], token))
    reviewers = reviewers_for(Settings(review={"tokens_file": path}).review)
    assert reviewers is not None and reviewers.authenticate(token) is not None


def test_the_token_command_prints_a_token_and_its_stanza(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["review", "token", "--name", "carol", "--tenant", "acme", "--tenant", "globex"]) == 0
    )
    out = capsys.readouterr().out
    token, stanza = out.split("\n", 1)
    path = tmp_path / "t.toml"
    path.write_text(stanza)
    reviewer = Reviewers.load(path).authenticate(token)
    assert reviewer is not None and reviewer.name == "carol"
    assert reviewer.tenants == {"acme", "globex"}
