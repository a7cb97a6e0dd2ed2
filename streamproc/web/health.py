"""``/livez`` and ``/readyz`` for an orchestrator, served by aiohttp.

Live means: the judging loop runs and no owned partition with lag has stood still for
``worker.stall_after_s``. A worker that is not live answers 503 with the reason, so a
Kubernetes liveness probe restarts it; the same condition is logged as ``worker_stalled``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from streamproc.web.server import AppServer

__all__ = ["HealthServer", "HealthState", "add_health_routes"]


@dataclass(frozen=True, slots=True)
class HealthState:
    live: bool
    ready: bool
    detail: dict[str, object]


class HealthServer(AppServer):
    """Serves the state ``probe()`` returns on every request."""

    def __init__(self, probe: Callable[[], HealthState], *, host: str, port: int) -> None:
        super().__init__(host=host, port=port)
        self._probe = probe

    def _application(self) -> web.Application:
        app = web.Application()
        add_health_routes(app, self._probe)
        return app


def add_health_routes(app: web.Application, probe: Callable[[], HealthState]) -> None:
    """``/livez`` and ``/readyz`` from ``probe``: 200 or 503, with its detail as JSON.
    Shared by the health server and the metrics server."""

    async def livez(_: web.Request) -> web.Response:
        state = probe()
        return web.json_response(
            {"live": state.live, **state.detail}, status=200 if state.live else 503
        )

    async def readyz(_: web.Request) -> web.Response:
        state = probe()
        return web.json_response(
            {"ready": state.ready, **state.detail}, status=200 if state.ready else 503
        )

    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
