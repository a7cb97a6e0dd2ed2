"""The review page's browser defences, on every response: a Content-Security-Policy that
allows only the page's own stylesheet and its one inline script (by a fresh nonce), so
evidence text can never run as code even if an escaping bug let markup through; no
framing, sniffing, referrers or caching of pages; and POSTs from another origin refused
before any handler runs."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

__all__ = ["NONCE", "same_origin_posts", "security_headers"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NONCE = web.RequestKey("nonce", str)
"""The nonce of this response's inline script, for the template."""


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    nonce = secrets.token_urlsafe(16)
    request[NONCE] = nonce
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        _harden(exc.headers, nonce, request.path)
        raise
    _harden(response.headers, nonce, request.path)
    return response


def _harden(headers: Any, nonce: str, path: str) -> None:
    headers.setdefault(
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        f"script-src 'nonce-{nonce}'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'",
    )
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("X-Frame-Options", "DENY")
    if not path.startswith("/static/"):
        headers.setdefault("Cache-Control", "no-store")


@web.middleware
async def same_origin_posts(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A POST whose ``Origin`` is another site is refused before anything else."""
    origin = request.headers.get("Origin")
    if (
        request.method == "POST"
        and origin
        and origin != "null"
        and urlsplit(origin).netloc != request.host
    ):
        return web.Response(status=403, text="cross-origin request refused")
    return await handler(request)
