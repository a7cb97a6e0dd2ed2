"""Closing a client never hangs, and never lets a stray cancellation replace the error
that ended a loop - but a real cancellation of the closer still goes through."""

from __future__ import annotations

import asyncio

import pytest

from streamproc.stream.loop.support import bounded_close


async def _cancelled_inside() -> None:
    raise asyncio.CancelledError  # what a client's cancelled internal task propagates


async def test_a_stray_cancellation_while_closing_is_logged_not_raised() -> None:
    await bounded_close(_cancelled_inside(), "consumer")  # returns: nothing escapes


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
