"""Which streamproc commands serve health endpoints, on which port and paths: compose
healthchecks and Kubernetes probes are checked against it (a probe of a port nobody
listens on restarts its container forever; one of a port bound to 127.0.0.1 too)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamproc.config import Settings

__all__ = ["HEALTH", "HealthEndpoint", "health_endpoint"]


@dataclass(frozen=True, slots=True)
class HealthEndpoint:
    """Where one command answers: ``port`` reads the port from its settings, and
    ``port_name`` is the containerPort name its Kubernetes manifest gives it; ``host``,
    when the command has its own bind address, reads that."""

    liveness: str
    readiness: str
    port: Callable[[Settings], int | None]
    port_name: str
    host: Callable[[Settings], str] | None = None

    @property
    def paths(self) -> dict[str, str]:
        """The path each kind of Kubernetes probe asks (startup waits for liveness)."""
        return {
            "startupProbe": self.liveness,
            "livenessProbe": self.liveness,
            "readinessProbe": self.readiness,
        }


HEALTH: dict[tuple[str, ...], HealthEndpoint] = {
    # /livez and /readyz on worker.health_port (all interfaces: the worker binds 0.0.0.0).
    ("worker",): HealthEndpoint("/livez", "/readyz", lambda s: s.worker.health_port, "health"),
    # The review page's /healthz, on the page's own address: it must bind beyond
    # 127.0.0.1 in a container (review.host), or neither probe nor Service reaches it.
    ("review", "serve"): HealthEndpoint(
        "/healthz", "/healthz", lambda s: s.review.port, "http", lambda s: s.review.host
    ),
    # The gate: /healthz once it listens, /readyz while its service takes requests, on
    # gate.port; like the page it must bind beyond 127.0.0.1 (gate.host).
    ("gate", "serve"): HealthEndpoint(
        "/healthz", "/readyz", lambda s: s.gate.port, "http", lambda s: s.gate.host
    ),
}


def health_endpoint(argv: Sequence[str]) -> HealthEndpoint | None:
    """The endpoint ``streamproc *argv`` serves, or None when it serves none."""
    return HEALTH.get(tuple(argv))
