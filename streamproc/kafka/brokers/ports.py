"""Free TCP ports on the loopback interface, for brokers started by tests and demos."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port nothing listens on right now.

    The OS picks it (bind to port 0); the socket is closed before returning, so a small race
    remains - callers that start a server on it should retry on "address in use".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
