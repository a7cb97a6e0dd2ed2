"""One fixed Ed25519 key pair for the audit tests, and a forger's key."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from streamproc.audit.signing import Signer

__all__ = ["CHECKER", "FORGER", "SIGNER", "write_key_files"]

_PRIVATE = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SIGNER = Signer(_PRIVATE)
CHECKER = SIGNER.checker()
FORGER = Signer(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))
"""Someone else's key: what a tamperer without the real one can sign with."""


def write_key_files(directory: Path) -> tuple[Path, Path]:
    """The pair as PEM files ``(private, public)`` under ``directory``."""
    private = directory / "audit-signing.pem"
    public = directory / "audit-verify.pem"
    private.write_bytes(
        _PRIVATE.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        _PRIVATE.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public
