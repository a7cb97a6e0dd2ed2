"""Repeated identical log lines: the first written, the rest counted into one summary."""

from __future__ import annotations

import logging

import pytest

from streamproc.telemetry.log_dedup import RepeatFilter


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def logged() -> tuple[logging.Logger, list[logging.LogRecord], RepeatFilter, _Clock]:
    clock = _Clock()
    repeats = RepeatFilter(10.0, clock=clock)
    logger = logging.getLogger("test.log_dedup")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers.clear()
    logger.filters.clear()
    seen: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger.addHandler(_Keep())
    logger.addFilter(repeats)
    return logger, seen, repeats, clock


def test_a_flood_of_one_error_is_one_line_then_one_count(
    logged: tuple[logging.Logger, list[logging.LogRecord], RepeatFilter, _Clock],
) -> None:
    logger, seen, repeats, clock = logged
    for fd in range(1000):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            logger.error("socket.accept() out of system resource\nsocket: fd=%d", fd, exc_info=True)
    assert len(seen) == 1
    repeats.flush()  # the window is still open: nothing yet
    assert len(seen) == 1
    clock.now = 10.0
    repeats.flush()
    assert len(seen) == 2
    assert seen[1].getMessage() == (
        "socket.accept() out of system resource (repeated 999 more times in 10 s)"
    )
    repeats.flush()
    assert len(seen) == 2, "counted once"


def test_different_errors_each_get_their_line_and_a_new_window_its_first(
    logged: tuple[logging.Logger, list[logging.LogRecord], RepeatFilter, _Clock],
) -> None:
    logger, seen, _, clock = logged
    logger.warning("bad request from %s", "10.0.0.1")
    logger.warning("bad request from %s", "10.0.0.2")  # same kind: digits do not count
    logger.warning("connection refused")
    logger.error("bad request from %s", "10.0.0.3")  # another level: another kind
    assert [r.getMessage() for r in seen] == [
        "bad request from 10.0.0.1",
        "connection refused",
        "bad request from 10.0.0.3",
    ]
    clock.now = 11.0
    logger.warning("bad request from %s", "10.0.0.4")
    assert seen[-1].getMessage() == ("bad request from 10.0.0.4 (repeated 1 more times in 11 s)")


def test_flush_all_writes_what_is_held_at_stop(
    logged: tuple[logging.Logger, list[logging.LogRecord], RepeatFilter, _Clock],
) -> None:
    logger, seen, repeats, _ = logged
    for _ in range(3):
        logger.info("http_header_timeout after 5 s")
    repeats.flush_all()
    assert [r.getMessage() for r in seen] == [
        "http_header_timeout after 5 s",
        "http_header_timeout after 5 s (repeated 2 more times in 0 s)",
    ]
