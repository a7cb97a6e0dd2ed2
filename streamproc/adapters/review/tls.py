"""The review page's TLS context, from ``settings.review.tls_cert`` and ``tls_key``.

Served over TLS, the page marks its session cookie Secure on every response; a mistake
in the two settings stops ``review serve`` with one line naming it.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamproc.config import ReviewSettings

__all__ = ["ReviewTlsError", "tls_context"]


class ReviewTlsError(ValueError):
    """The review page's TLS settings cannot be used; the message says which and why."""


def tls_context(review: ReviewSettings) -> ssl.SSLContext | None:
    """The server context when both files are set; None when neither is."""
    cert, key = review.tls_cert, review.tls_key
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("TLS_CERT", "TLS_KEY") if key is None else ("TLS_KEY", "TLS_CERT")
        raise ReviewTlsError(
            f"STREAMPROC_REVIEW__{given} is set but STREAMPROC_REVIEW__{missing} is not: "
            "set both to serve HTTPS, or neither to serve HTTP"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile=cert, keyfile=key)
    except (OSError, ssl.SSLError) as exc:
        raise ReviewTlsError(
            f"cannot load the review page's TLS certificate {cert} and key {key}: {exc}"
        ) from None
    return context
