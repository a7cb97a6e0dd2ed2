"""What a benchmark ran on: one description for every benchmark script's report."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

__all__ = ["cpu_model", "machine_info"]


def cpu_model(cpuinfo: str) -> str:
    """The processor's name from the text of ``/proc/cpuinfo`` ("unknown" when absent)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
            return value.strip()
    return "unknown"


def machine_info() -> dict[str, Any]:
    """Usable cores, CPU model, system, Python and ONNX Runtime versions."""
    try:
        ort = importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        ort = None
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "nproc": usable or os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(cpuinfo),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "onnxruntime": ort,
    }
