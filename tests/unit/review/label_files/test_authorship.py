"""Whose labels ``review import`` publishes: a token's reviewer (checked against the
tokens file), or ``import:<file name>`` - never a name from the file or the command line
taken on trust. Every refusal here happens before a broker is contacted (the broker URL
points nowhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamproc.cli.main import main
from streamproc.review.label_files.authorship import import_author, read_token
from streamproc.review.label_files.importer import read_labels
from streamproc.review.page.auth import new_token, token_stanza

EXPORT = Path(__file__).parent / "data" / "label_studio_export.json"
ANA = new_token()


def line(**fields: object) -> str:
    row = {"answer_id": "a-1", "labelled_at": "2026-12-01T09:00:00+01:00", "tenant": "acme"}
    return json.dumps({**row, "answer_label": "faithful", **fields}) + "\n"


@pytest.fixture()
def tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STREAMPROC_BROKER_URL", "kafka://127.0.0.1:1")
    monkeypatch.delenv("STREAMPROC_REVIEWER_TOKEN", raising=False)
    path = tmp_path / "tokens.toml"
    path.write_text(token_stanza("ana", ["acme"], ANA))
    monkeypatch.setenv("STREAMPROC_REVIEW__TOKENS_FILE", str(path))
    return path


def test_without_a_token_every_label_is_the_imports_whatever_the_file_says(
    tmp_path: Path,
) -> None:
    labels = tmp_path / "batch-7.jsonl"
    labels.write_text(line(reviewer="bob") + line(answer_id="a-2"))
    author = import_author(labels)
    read = read_labels(labels, "jsonl", author=author)
    assert author == "import:batch-7.jsonl"
    assert [label.reviewer for label in read] == [author, author]
    studio = read_labels(EXPORT, "label-studio", author=import_author(EXPORT))
    assert {label.reviewer for label in studio} == {"import:label_studio_export.json"}
    # ids come from the recorded author, so a re-import of the file gives the same ones
    assert read[0].label_id == read_labels(labels, "jsonl", author=author)[0].label_id


def test_a_named_reviewer_without_its_token_is_refused(
    tokens: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(line())
    assert main(["review", "import", str(labels), "--reviewer", "bob"]) == 2
    error = capsys.readouterr().err
    assert "needs that reviewer's token" in error and "import:labels.jsonl" in error


@pytest.mark.parametrize(
    ("token", "content", "reviewer", "expected"),
    [
        ("not-a-token", line(), None, "not in the tokens file"),
        (ANA, line(reviewer="bob"), None, "names reviewer 'bob', not the token's 'ana'"),
        (ANA, line(tenant="globex"), None, "may not label tenant 'globex'"),
        (ANA, line(), "bob", "--reviewer 'bob' is not the token's reviewer ('ana')"),
    ],
    ids=["unknown-token", "other-reviewer-in-file", "other-tenant", "other-reviewer-flag"],
)
def test_a_token_proves_only_its_own_reviewer_and_tenants(
    tokens: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    token: str,
    content: str,
    reviewer: str | None,
    expected: str,
) -> None:
    token_file = tmp_path / "my.token"
    token_file.write_text(token + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(content)
    args = ["review", "import", str(labels), "--token-file", str(token_file)]
    assert main(args + (["--reviewer", reviewer] if reviewer else [])) == 2
    error = capsys.readouterr().err
    assert error.startswith("streamproc review import:") and expected in error
    assert ANA not in error


def test_a_token_needs_a_tokens_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMPROC_BROKER_URL", "kafka://127.0.0.1:1")
    monkeypatch.delenv("STREAMPROC_REVIEW__TOKENS_FILE", raising=False)
    monkeypatch.setenv("STREAMPROC_REVIEWER_TOKEN", ANA)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(line())
    assert main(["review", "import", str(labels)]) == 2
    assert "no tokens file" in capsys.readouterr().err


def test_the_token_file_holds_one_token(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text(f"  {ANA}  \nignored\n")
    assert read_token(path) == ANA
    path.write_text("\n \n")
    with pytest.raises(ValueError, match="empty"):
        read_token(path)
    with pytest.raises(ValueError, match="cannot read"):
        read_token(tmp_path / "missing")
