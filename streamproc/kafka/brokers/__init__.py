"""Local brokers for tests and the demo: an embedded Tansu process and port helpers."""

from streamproc.kafka.brokers.ports import free_port
from streamproc.kafka.brokers.tansu import (
    BrokerStartError,
    EmbeddedTansu,
    TansuNotInstalledError,
    tansu_binary,
)

__all__ = [
    "BrokerStartError",
    "EmbeddedTansu",
    "TansuNotInstalledError",
    "free_port",
    "tansu_binary",
]
