"""The review page's TLS context, from ``settings.review.tls_cert`` and ``tls_key``.

Served over TLS, the page marks its session cookie Secure on every response; a mistake
in the two settings stops ``review serve`` with one line naming it.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from streamproc.web.tls import server_tls_context

if TYPE_CHECKING:
    from streamproc.review.options import ReviewSettings

__all__ = ["ReviewTlsError", "tls_context"]


class ReviewTlsError(ValueError):
    """The review page's TLS settings cannot be used; the message says which and why."""


def tls_context(review: ReviewSettings) -> ssl.SSLContext | None:
    """The server context when both files are set; None when neither is."""
    return server_tls_context(
        review.tls_cert,
        review.tls_key,
        section="REVIEW",
        served="the review page",
        error=ReviewTlsError,
    )
