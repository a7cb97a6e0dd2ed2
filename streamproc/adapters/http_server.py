"""Serving one aiohttp application on ``host:port``: what the health, metrics and review
servers share.

Port 0 asks the OS for any free port; :attr:`AppServer.port` says which was bound. No
access log is written. With an ``ssl_context`` the server speaks HTTPS only.
"""

from __future__ import annotations

import ssl

from aiohttp import web

__all__ = ["AppServer"]


class AppServer:
    """Serves the application :meth:`_application` makes, from :meth:`start` to
    :meth:`stop`."""

    def __init__(self, *, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        self._host = host
        self._port = port
        self._ssl_context = ssl_context
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        """The bound port once started (the OS's pick when asked for 0)."""

    def _application(self) -> web.Application:
        raise NotImplementedError

    async def start(self) -> None:
        self._runner = web.AppRunner(self._application(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(
            self._runner, self._host, self._port, ssl_context=self._ssl_context
        ).start()
        # With port 0 the OS picks one; the runner knows which (host, port) it bound.
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
