"""A benchmark's progress, on stderr: its stdout carries the report (markdown, or JSON
with ``--json`` alone), so the running commentary must never mix into it."""

from __future__ import annotations

import sys

__all__ = ["log"]


def log(message: str) -> None:
    """``message`` on stderr, flushed at once so progress shows while a phase runs."""
    print(message, file=sys.stderr, flush=True)
