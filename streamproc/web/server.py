"""Serving one aiohttp application on ``host:port``: what the gate, the review page, the
health and the metrics servers share.

Port 0 asks the OS for any free port; :attr:`AppServer.port` says which was bound. No
access log is written. With an ``ssl_context`` the server speaks HTTPS only. Every server
applies :class:`~streamproc.web.limits.HttpLimits` (head, body and idle
timeouts, a connection cap, JSON errors), and folds repeated error lines of asyncio and
aiohttp into one with a count (:mod:`streamproc.telemetry.log_dedup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from aiohttp import web

from streamproc.telemetry.log_dedup import RepeatFilter, install_repeat_filter
from streamproc.web.limits import HttpLimits, LimitedAppRunner, LimitedSite

__all__ = ["PROBE_LIMITS", "AppServer"]

PROBE_LIMITS = HttpLimits(max_connections=64)
"""The limits of a server only probes and scrapers call (health, metrics)."""


class AppServer:
    """Serves the application :meth:`_application` makes, from :meth:`start` to
    :meth:`stop`, under ``limits``."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: HttpLimits = PROBE_LIMITS,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl_context = ssl_context
        self._limits = limits
        self._runner: web.AppRunner | None = None
        self._flusher: asyncio.Task[None] | None = None
        self.port: int | None = None
        """The bound port once started (the OS's pick when asked for 0)."""

    def _application(self) -> web.Application:
        raise NotImplementedError

    async def start(self) -> None:
        repeats = install_repeat_filter()
        self._runner = LimitedAppRunner(self._application(), self._limits)
        await self._runner.setup()
        await LimitedSite(
            self._runner,
            self._host,
            self._port,
            limits=self._limits,
            ssl_context=self._ssl_context,
        ).start()
        # With port 0 the OS picks one; the runner knows which (host, port) it bound.
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port
        self._flusher = asyncio.create_task(_flush_repeats(repeats), name="http-log-repeats")

    async def stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
            install_repeat_filter().flush_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def _flush_repeats(repeats: RepeatFilter) -> None:
    """Write the count of held-back repeats once each window closes."""
    while True:
        await asyncio.sleep(repeats.window_s)
        repeats.flush()
