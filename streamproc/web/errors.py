"""Errors a server itself produces, as one line of JSON that never quotes the request.

``{"error": "<status name>", "detail": "<short text>"}``, the shape of the gate's own
refusals. :func:`json_errors` turns aiohttp's plain-text replies (``404: Not Found``,
``405: Method Not Allowed``, ...) into it; a handler's own error text is left as written.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import hdrs, web

__all__ = ["error_body", "json_errors", "raw_reply"]

_JSON = "application/json"
_KEPT_HEADERS = (hdrs.ALLOW, hdrs.WWW_AUTHENTICATE, hdrs.RETRY_AFTER)


def error_body(status: int, detail: str) -> str:
    """One line of JSON naming ``status`` (``bad_request``, ...) with a short ``detail``
    that never quotes the request."""
    try:
        name = HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        name = "error"
    return json.dumps({"error": name, "detail": detail[:300]}, separators=(",", ":"))


def raw_reply(status: int, detail: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, written straight to a
    transport where no request object exists (a head that never came, a refused
    connection)."""
    body = error_body(status, detail).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        f"Content-Type: {_JSON}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


@web.middleware
async def json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """aiohttp's own error replies (its default ``"<status>: <reason>"`` text) as JSON."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.text != f"{exc.status}: {exc.reason}":
            raise
        response = web.Response(
            status=exc.status, text=error_body(exc.status, exc.reason), content_type=_JSON
        )
        for name in _KEPT_HEADERS:
            if name in exc.headers:
                response.headers[name] = exc.headers[name]
        return response
