"""How the Kafka clients connect: security protocol, SASL and TLS."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from streamproc.options import OptionGroup

__all__ = ["KafkaSecurity"]


class KafkaSecurity(OptionGroup):
    """How every Kafka client of streamproc authenticates and encrypts."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(default=None, description="CA bundle (PEM).")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (mTLS).")
    ssl_keyfile: Path | None = None
    ssl_check_hostname: bool = True
