"""Benchmark-only helpers for scripts/ (not shipped in the wheel)."""
