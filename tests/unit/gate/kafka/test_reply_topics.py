"""Which reply topics the gate sends to: legal, not internal, and in the cluster's
metadata - fetched again for an unknown name at most every ``refresh_s``, a failed fetch
keeping what was known."""

from __future__ import annotations

import asyncio

import pytest

from streamproc.gate.kafka.reply_topics import ReplyTopics, unusable_reply_topic


@pytest.mark.parametrize("name", ["caller.replies", "a", "A-b_c.9", "x" * 249, "..."])
def test_a_legal_topic_name_is_usable(name: str) -> None:
    assert unusable_reply_topic(name) is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "is not a legal Kafka topic name"),
        (".", "is not a legal Kafka topic name"),
        ("..", "is not a legal Kafka topic name"),
        ("x" * 250, "is not a legal Kafka topic name"),
        ("with space", "is not a legal Kafka topic name"),
        ("replies/../etc", "is not a legal Kafka topic name"),
        ("répliques", "is not a legal Kafka topic name"),
        ("__consumer_offsets", "is an internal topic"),
        ("__transaction_state", "is an internal topic"),
    ],
)
def test_an_unusable_topic_name_says_why(name: str, says: str) -> None:
    reason = unusable_reply_topic(name)
    assert reason is not None and says in reason
    assert len(reason) < 200  # a long name is cut, the dead letter stays one line


class Cluster:
    """Topic metadata that can change or fail, counting fetches."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)
        self.fetches = 0
        self.failing = False
        self.slow_s = 0.0

    async def fetch(self) -> set[str]:
        self.fetches += 1
        await asyncio.sleep(self.slow_s)
        if self.failing:
            raise ConnectionError("broker away")
        return set(self.names)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_known_topics_are_not_fetched_again_and_unknown_ones_at_most_every_refresh() -> None:
    cluster, clock = Cluster("a"), Clock()
    topics = ReplyTopics(cluster.fetch, refresh_s=1.0, clock=clock)
    assert await topics.exists("a") and cluster.fetches == 1
    assert await topics.exists("a") and cluster.fetches == 1
    assert not await topics.exists("b")  # within refresh_s of the last fetch: not asked
    assert cluster.fetches == 1
    cluster.names.add("b")
    assert not await topics.exists("b")
    clock.now += 1.0
    assert await topics.exists("b")  # a caller's new topic is found after refresh_s
    assert cluster.fetches == 2


async def test_a_failed_fetch_keeps_what_was_known() -> None:
    cluster, clock = Cluster("a"), Clock()
    topics = ReplyTopics(cluster.fetch, refresh_s=1.0, clock=clock)
    assert await topics.exists("a")
    cluster.failing = True
    clock.now += 5
    assert not await topics.exists("b")
    assert cluster.fetches == 2
    assert await topics.exists("a")


async def test_requests_checked_during_a_fetch_wait_for_it_and_share_it() -> None:
    """Requests are checked concurrently: those naming a new topic while its metadata is
    being fetched must see the fetch's answer, not what was known before it."""
    cluster, clock = Cluster("a", "new"), Clock()
    cluster.slow_s = 0.05
    topics = ReplyTopics(cluster.fetch, refresh_s=1.0, clock=clock)
    found = await asyncio.gather(*(topics.exists("new") for _ in range(5)))
    assert found == [True] * 5
    assert cluster.fetches == 1


async def test_a_caller_going_away_does_not_cancel_the_fetch_others_wait_for() -> None:
    cluster, clock = Cluster("new"), Clock()
    cluster.slow_s = 0.05
    topics = ReplyTopics(cluster.fetch, refresh_s=1.0, clock=clock)
    leaving = asyncio.create_task(topics.exists("new"))
    staying = asyncio.create_task(topics.exists("new"))
    await asyncio.sleep(0.01)
    leaving.cancel()
    assert await staying
    assert cluster.fetches == 1
