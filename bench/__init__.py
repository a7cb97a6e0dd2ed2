"""The benchmarks, run as ``python -m bench NAME [OPTIONS]`` from the repository root
(:mod:`bench.__main__` lists them), and their helpers. Not shipped in the wheel; the
figures they gave are in BENCHMARKS.md."""

from __future__ import annotations

import os
import shlex
import sys

__all__ = ["command_line"]


def command_line() -> str:
    """How this process was started, to paste from the repository root: the interpreter as
    typed there (``.venv/bin/python``, its full path when outside it), then ``-m bench
    NAME ...`` for a benchmark, or the script and its arguments as given."""
    relative = os.path.relpath(sys.executable)
    python = sys.executable if relative.startswith("..") else relative
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        module = spec.name.removesuffix(".__main__")
        return shlex.join([python, "-m", module, *sys.argv[1:]])
    return shlex.join([python, *sys.argv])
