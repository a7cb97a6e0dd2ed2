"""Adapters at the edge: logging now; tracing, metrics and audit storage later."""

__all__: list[str] = []
