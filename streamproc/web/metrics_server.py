"""``/metrics`` for Prometheus, with ``/livez`` and ``/readyz`` beside it, on aiohttp.

Bound to ``metrics.host`` (127.0.0.1 unless an operator opens it) and
``metrics.port`` (0: any free port, :attr:`MetricsServer.port` says which).
The scrape answers in the format the scraper asks for (OpenMetrics for Prometheus,
text 0.0.4 otherwise), as prometheus-client's own servers do. Pulled values (lag) are
read on the event loop; the text is made in a thread so a large registry never blocks
the consumer loops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from streamproc.telemetry.options import MetricsSettings
from streamproc.web.health import HealthState, add_health_routes
from streamproc.web.server import AppServer

__all__ = ["MetricsServer", "ServedMetrics"]


class ServedMetrics(Protocol):
    """What the server serves: a registry, and a hook to bring pulled values up to date
    before each scrape (the worker's and the gate's metrics both are)."""

    @property
    def registry(self) -> CollectorRegistry: ...

    def refresh(self) -> None: ...


class MetricsServer(AppServer):
    """Serves ``metrics`` and, when ``probe`` is given, the health of the worker."""

    def __init__(
        self,
        metrics: ServedMetrics,
        *,
        host: str,
        port: int,
        probe: Callable[[], HealthState] | None = None,
    ) -> None:
        super().__init__(host=host, port=port)
        self._metrics = metrics
        self._probe = probe

    @classmethod
    def from_settings(
        cls,
        settings: MetricsSettings,
        metrics: ServedMetrics,
        probe: Callable[[], HealthState] | None = None,
    ) -> MetricsServer | None:
        """The server ``settings`` (``metrics.*``) ask for; None when its port is None."""
        if settings.port is None:
            return None
        return cls(metrics, host=settings.host, port=settings.port, probe=probe)

    @property
    def url(self) -> str:
        """Where ``/metrics`` is served (after :meth:`start`)."""
        if self.port is None:
            raise RuntimeError("the metrics server is not started")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}/metrics"

    def _application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        if self._probe is not None:
            add_health_routes(app, self._probe)
        return app

    async def stop(self) -> None:
        """Stop serving; :attr:`url` fails again until the next :meth:`start`."""
        if self._runner is not None:
            await super().stop()
            self.port = None

    async def _scrape(self, request: web.Request) -> web.Response:
        self._metrics.refresh()
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await asyncio.to_thread(encode, self._metrics.registry)
        # aiohttp refuses a charset inside content_type; the header is set whole instead.
        return web.Response(body=body, headers={"Content-Type": content_type})
