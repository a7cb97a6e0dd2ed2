"""Ed25519 signatures for the audit trail's checkpoints and purge entries.

The private key lives in a file outside the store (``settings.audit.signing_key_file``),
read by the sink and by ``audit purge``; ``audit verify`` needs only the public key
(``settings.audit.verify_key_file`` or ``--public-key``). A signed document is a JSON
object with two added fields: ``key_id`` (the first 16 hex digits of the sha256 of the
raw public key) and ``signature`` (hex), made over the canonical JSON of the document
without its ``signature`` field - ``key_id`` included, so it cannot be swapped.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from streamproc.audit.chain import canonical_json

__all__ = ["KeyFileError", "SignatureChecker", "Signer", "generate_key_pair"]


class KeyFileError(ValueError):
    """A key file that is missing or holds no Ed25519 key: one line for the operator."""


def _key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _payload(document: Mapping[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in document.items() if k != "signature"})


class Signer:
    """Signs audit documents with one private key."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.key_id = _key_id(private.public_key())

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise KeyFileError(f"cannot read the audit signing key {path}: {exc}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"{path} is not an Ed25519 private key")
        return cls(key)

    def checker(self) -> SignatureChecker:
        return SignatureChecker(self._private.public_key())

    def sign(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """``document`` with ``key_id`` and ``signature`` added."""
        unsigned = {**document, "key_id": self.key_id}
        unsigned.pop("signature", None)
        return {**unsigned, "signature": self._private.sign(_payload(unsigned)).hex()}


class SignatureChecker:
    """Checks signatures with one public key: all ``audit verify`` needs."""

    def __init__(self, public: Ed25519PublicKey) -> None:
        self._public = public
        self.key_id = _key_id(public)

    @classmethod
    def from_file(cls, path: Path) -> SignatureChecker:
        try:
            key = serialization.load_pem_public_key(path.read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            raise KeyFileError(f"cannot read the audit public key {path}: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"{path} is not an Ed25519 public key")
        return cls(key)

    def valid(self, document: Mapping[str, Any]) -> bool:
        """Whether ``document`` carries this key's id and a signature over the rest."""
        signature = document.get("signature")
        if document.get("key_id") != self.key_id or not isinstance(signature, str):
            return False
        try:
            self._public.verify(bytes.fromhex(signature), _payload(document))
        except (InvalidSignature, ValueError):
            return False
        return True


def generate_key_pair(private_path: Path, public_path: Path) -> str:
    """Write a new key pair (PEM; the private file readable by its owner only) and
    return its key id. Refuses to overwrite an existing file."""
    for path in (private_path, public_path):
        if path.exists():
            raise KeyFileError(f"{path} already exists: not overwriting a key")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public_path.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return _key_id(private.public_key())
