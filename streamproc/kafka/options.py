"""How the Kafka clients connect: the broker, security protocol, SASL and TLS."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from streamproc.options import OptionGroup

__all__ = ["KafkaConnection", "KafkaSecurity"]


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


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    """Where the broker is and how every client of one process reaches it; the composition
    root builds it once (:func:`streamproc.wiring.kafka_connection`)."""

    bootstrap_servers: str
    """``host:port,host:port``, as Kafka clients take it (from ``broker_url``)."""
    security: KafkaSecurity
    """``security.*``."""
    flavour: Literal["kafka", "tansu"]
    """``broker_flavour``: 'tansu' lacks transactions and multi-record batches."""
    connect_timeout_s: float
    """``broker_connect_timeout_s``: how long a starting process waits for the broker."""
