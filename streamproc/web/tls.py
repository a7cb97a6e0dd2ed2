"""A server's TLS context from a certificate and key setting pair: both or neither.

The gate and the review page take the same two settings; a mistake in them is one line
naming the variables, never a traceback (``gate serve`` and ``review serve`` exit 2).
"""

from __future__ import annotations

import ssl
from pathlib import Path

__all__ = ["server_tls_context"]


def server_tls_context(
    cert: Path | str | None,
    key: Path | str | None,
    *,
    section: str,
    served: str,
    error: type[ValueError],
) -> ssl.SSLContext | None:
    """The context when both files are set; None when neither is. ``error`` (its message
    naming ``STREAMPROC_<section>__TLS_CERT`` / ``__TLS_KEY``) for one without the other,
    or files that do not load; ``served`` names the server in that message."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("TLS_CERT", "TLS_KEY") if key is None else ("TLS_KEY", "TLS_CERT")
        raise error(
            f"STREAMPROC_{section}__{given} is set but STREAMPROC_{section}__{missing} is "
            "not: set both to serve HTTPS, or neither to serve HTTP"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile=Path(cert), keyfile=Path(key))
    except (OSError, ssl.SSLError) as exc:
        raise error(f"cannot load {served}'s TLS certificate {cert} and key {key}: {exc}") from None
    return context
