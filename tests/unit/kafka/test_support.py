"""Closing a client never hangs, and never lets a stray cancellation replace the error
that ended a loop - but a real cancellation of the closer still goes through."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from streamproc.kafka.support import bounded_close


async def _cancelled_inside() -> None:
    raise asyncio.CancelledError  # what a client's cancelled internal task propagates


async def test_a_stray_cancellation_while_closing_is_logged_not_raised() -> None:
    with capture_logs() as logs:
        await bounded_close(_cancelled_inside(), "consumer")  # returns: nothing escapes
    assert [(e["event"], e["log_level"], e["client"]) for e in logs] == [
        ("client_close_failed", "warning", "consumer")
    ]
    assert "CancelledError" in logs[0]["error"]


async def test_a_close_that_fails_is_logged_with_its_error() -> None:
    async def refused() -> None:
        raise OSError("connection refused")

    with capture_logs() as logs:
        await bounded_close(refused(), "producer")
    assert [(e["event"], e["client"], e["error"]) for e in logs] == [
        ("client_close_failed", "producer", "OSError('connection refused')")
    ]


async def test_cancelling_the_closer_itself_still_cancels_it() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(60)

    task = asyncio.create_task(bounded_close(slow(), "producer"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
