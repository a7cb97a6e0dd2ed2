"""Repeated identical log lines written once, with a count.

A flood of bad connections makes asyncio and aiohttp log the same error (often with a
traceback) for every one of them: tens of thousands of lines a minute, which fills the
disk and buries everything else. :class:`RepeatFilter` lets the first line of a kind
through, counts the next ones for ``window_s`` seconds, and then writes one summary line
saying how many there were. Two lines are "identical" when their logger, level,
exception type and first line of message agree once digits are blanked (so a peer's
address or a file descriptor number does not make a new kind).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SERVER_LOGGERS", "RepeatFilter", "install_repeat_filter"]

SERVER_LOGGERS = (
    "asyncio",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.access",
    "aiohttp.internal",
    "streamproc.http",
)
"""The loggers a flood of connections writes to: asyncio's accept and transport errors,
aiohttp's request errors, and this package's own connection-limit events."""

_DIGITS = re.compile(r"\d+")
_MAX_KINDS = 1000
_SUMMARY = "_repeat_summary"


@dataclass(slots=True)
class _Kind:
    record: logging.LogRecord
    since: float
    repeats: int = 0


class RepeatFilter(logging.Filter):
    """Passes the first record of each kind per ``window_s``; see the module doc.

    Thread-safe; at most 1,000 kinds are tracked (the oldest forgotten first)."""

    def __init__(self, window_s: float = 10.0, *, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._kinds: dict[tuple[str, int, str, str], _Kind] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _SUMMARY, False):
            return True
        key = _kind(record)
        now = self._clock()
        with self._lock:
            seen = self._kinds.get(key)
            if seen is not None and now - seen.since < self.window_s:
                seen.repeats += 1
                return False
            if seen is not None and seen.repeats:
                _note_repeats(record, seen.repeats, now - seen.since)
            self._kinds.pop(key, None)
            self._kinds[key] = _Kind(record, now)
            while len(self._kinds) > _MAX_KINDS:
                del self._kinds[next(iter(self._kinds))]
        return True

    def flush(self) -> None:
        """Write a summary for each kind whose window has closed with repeats in it."""
        now = self._clock()
        with self._lock:
            due = [
                (key, kind)
                for key, kind in self._kinds.items()
                if kind.repeats and now - kind.since >= self.window_s
            ]
            for key, _ in due:
                del self._kinds[key]
        for _, kind in due:
            self._write_summary(kind, now)

    def flush_all(self) -> None:
        """Write a summary for every kind with repeats, window closed or not (at stop)."""
        now = self._clock()
        with self._lock:
            due = [kind for kind in self._kinds.values() if kind.repeats]
            self._kinds.clear()
        for kind in due:
            self._write_summary(kind, now)

    @staticmethod
    def _write_summary(kind: _Kind, now: float) -> None:
        first = kind.record
        summary = logging.LogRecord(
            first.name,
            first.levelno,
            first.pathname,
            first.lineno,
            "%s",
            (_first_line(first),),
            None,
        )
        _note_repeats(summary, kind.repeats, now - kind.since)
        setattr(summary, _SUMMARY, True)
        logging.getLogger(first.name).handle(summary)


def _first_line(record: logging.LogRecord) -> str:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string is still a kind of line  # noqa: BLE001
        message = str(record.msg)
    return message.split("\n", 1)[0][:300]


def _kind(record: logging.LogRecord) -> tuple[str, int, str, str]:
    error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    return (record.name, record.levelno, _DIGITS.sub("#", _first_line(record)), error)


def _note_repeats(record: logging.LogRecord, repeats: int, span_s: float) -> None:
    """Say on ``record`` how many like it were held back (read by humans and by
    structlog's JSON renderer alike)."""
    record.msg = f"{record.msg} (repeated {repeats} more times in {span_s:.0f} s)"
    record.repeated = repeats


_installed: RepeatFilter | None = None
_install_lock = threading.Lock()


def install_repeat_filter(window_s: float = 10.0) -> RepeatFilter:
    """The process's one :class:`RepeatFilter`, on every logger of :data:`SERVER_LOGGERS`
    (installed on the first call; later calls return it)."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = RepeatFilter(window_s)
        for name in SERVER_LOGGERS:
            logger = logging.getLogger(name)
            if _installed not in logger.filters:
                logger.addFilter(_installed)
        return _installed
