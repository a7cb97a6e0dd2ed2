"""Local brokers for tests and the demo: an embedded Tansu process and port helpers."""

from streamproc.brokers.ports import free_port
from streamproc.brokers.tansu import BrokerStartError, EmbeddedTansu

__all__ = ["BrokerStartError", "EmbeddedTansu", "free_port"]
