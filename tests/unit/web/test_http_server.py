"""Serving an aiohttp application: the bound port, and stopped meaning stopped."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from streamproc.web.health import HealthServer, HealthState
from streamproc.web.server import AppServer


class _Hello(AppServer):
    def _application(self) -> web.Application:
        async def hello(_: web.Request) -> web.Response:
            return web.Response(text="hello")

        app = web.Application()
        app.router.add_get("/", hello)
        return app


async def test_port_zero_binds_a_free_port_that_serves_until_stopped() -> None:
    server = _Hello(host="127.0.0.1", port=0)
    assert server.port is None
    await server.start()
    try:
        assert server.port is not None and server.port > 0
        url = f"http://127.0.0.1:{server.port}/"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            assert await response.text() == "hello"
    finally:
        await server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as http:
            await http.get(f"http://127.0.0.1:{server.port}/")
    await server.stop()  # a second stop does nothing


async def test_the_health_server_answers_its_probe() -> None:
    server = HealthServer(
        lambda: HealthState(live=True, ready=False, detail={"lag": 3}), host="127.0.0.1", port=0
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{server.port}"
            async with http.get(f"{base}/livez") as response:
                assert response.status == 200
                assert await response.json() == {"live": True, "lag": 3}
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 503
    finally:
        await server.stop()


def test_a_server_without_an_application_cannot_start() -> None:
    with pytest.raises(NotImplementedError):
        AppServer(host="127.0.0.1", port=0)._application()
