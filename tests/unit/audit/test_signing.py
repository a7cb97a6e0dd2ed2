"""Ed25519 signing of audit documents, and ``audit keygen``."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from streamproc.audit.signing import KeyFileError, SignatureChecker, Signer
from streamproc.cli.main import main
from tests.unit.audit.keys import CHECKER, FORGER, SIGNER


def test_a_signed_document_verifies_and_any_change_breaks_it() -> None:
    signed = SIGNER.sign({"kind": "audit_checkpoint", "partition": 0, "seq": 5, "at": "t"})
    assert CHECKER.valid(signed)
    assert not CHECKER.valid({**signed, "seq": 6})
    assert not CHECKER.valid({**signed, "key_id": FORGER.key_id})
    assert not CHECKER.valid(FORGER.sign(signed)), "another key's signature"
    assert not CHECKER.valid({k: v for k, v in signed.items() if k != "signature"})
    assert not CHECKER.valid({**signed, "signature": "zz"})


def test_keygen_writes_a_pair_verify_can_use_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    out = capsys.readouterr().out
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    signer, checker = Signer.from_file(private), SignatureChecker.from_file(public)
    assert f"key {signer.key_id}" in out and checker.key_id == signer.key_id
    assert checker.valid(signer.sign({"seq": 1}))
    before = private.read_bytes()
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 2
    assert "already exists" in capsys.readouterr().err and private.read_bytes() == before
    with pytest.raises(KeyFileError, match=r"not an Ed25519 private key|cannot read"):
        Signer.from_file(public)
