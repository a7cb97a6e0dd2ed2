"""Tracing, metrics, logging and the hooks the loops report to."""

__all__: list[str] = []
