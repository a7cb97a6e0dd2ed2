"""Connection limits every HTTP server applies."""

from __future__ import annotations

from pydantic import Field, model_validator

from streamproc.options import OptionGroup

__all__ = ["HttpLimitSettings"]


class HttpLimitSettings(OptionGroup):
    """What one HTTP connection may hold of a server (the gate, the review page): each
    phase of a request is timed, and open connections are capped below the file limit."""

    header_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="A request head (request line and headers) must arrive within this "
        "many seconds of the connection opening or of its first byte; else 408 and close.",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="A request body must arrive within this many seconds of its head; "
        "else 408 and close.",
    )
    idle_timeout_s: float = Field(
        default=75.0,
        gt=0,
        le=3600,
        description="A keep-alive connection idle between requests this long is closed.",
    )
    max_connections: int = Field(
        default=512,
        ge=1,
        le=1_000_000,
        description="Open connections at most (lowered at start to fit the open-file "
        "limit). Beyond it the oldest connection not in a request is closed, or, when "
        "all are in one, the new connection gets 503 and is closed.",
    )

    @model_validator(mode="after")
    def _header_within_idle(self) -> HttpLimitSettings:
        if self.header_timeout_s > self.idle_timeout_s:
            raise ValueError("header_timeout_s must not exceed idle_timeout_s")
        return self
