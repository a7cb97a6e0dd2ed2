"""Which reply topics the gate may send to: a caller names its own, in a header.

A reply to a topic that does not exist would not fail fast: the producer waits for the
topic's metadata, then the whole batch's transaction fails and the loop stops. A bad
header must cost its own request only, so a reply topic is checked before anything is
sent there: a legal Kafka topic name, not an internal one (``__consumer_offsets``,
``__transaction_state``), and present in the cluster's metadata. The metadata is cached
and fetched again, at most every ``refresh_s``, when an unknown name comes (a caller's
new reply topic is found within that time); requests checked while a fetch is under way
wait for that fetch rather than being judged on what was known before it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

import structlog

__all__ = ["ReplyTopics", "unusable_reply_topic"]

log = structlog.get_logger(__name__)

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def unusable_reply_topic(name: str) -> str | None:
    """Why ``name`` cannot be a reply topic, or None when it can (existence aside)."""
    if not _TOPIC_NAME.fullmatch(name) or name in {".", ".."}:
        return f"reply-topic {name[:80]!r} is not a legal Kafka topic name"
    if name.startswith("__"):
        return f"reply-topic {name!r} is an internal topic"
    return None


class ReplyTopics:
    """The cluster's topic names, fetched by ``fetch`` (the consumer's ``topics()``)."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[set[str]]],
        *,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._refresh_s = refresh_s
        self._clock = clock
        self._known: set[str] = set()
        self._fetched_at: float | None = None
        self._fetching: asyncio.Task[None] | None = None

    async def exists(self, name: str) -> bool:
        """Whether ``name`` is a topic of the cluster (as of at most ``refresh_s`` ago
        when it was not known before). A failed fetch keeps what was known."""
        if name in self._known:
            return True
        if self._fetching is None:
            now = self._clock()
            if self._fetched_at is not None and now - self._fetched_at < self._refresh_s:
                return False
            self._fetched_at = now
            self._fetching = asyncio.ensure_future(self._refresh())
        await asyncio.shield(self._fetching)  # a caller going away leaves the others' fetch
        return name in self._known

    async def _refresh(self) -> None:
        try:
            self._known = set(await self._fetch())
        except Exception as exc:  # noqa: BLE001 - the request is dead-lettered instead
            log.warning("gate_topic_metadata_failed", error=repr(exc))
        finally:
            self._fetching = None
