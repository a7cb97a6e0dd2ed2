"""The label claims behind "one label per reviewer, item and form": concurrent claims of
one key have one winner (threads on one SQLite file, as replicas share a database), the
same form is told apart from another, and claims are released, taken over and forgotten."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from threading import Barrier

import pytest

from streamproc.review.page.submissions import (
    FORM_TOKEN,
    KeyedLocks,
    SubmissionKey,
    SubmissionLedger,
    form_label_id,
)

NOW = datetime(2026, 1, 3, 12, 0, tzinfo=UTC)
KEY = SubmissionKey("acme", "a1", "alice")
FORM = "f" * 22
OTHER = "o" * 22


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[SubmissionLedger]:
    with SubmissionLedger(f"sqlite:///{tmp_path / 'review.db'}", stale_s=120) as ledger:
        yield ledger


def test_concurrent_claims_of_one_key_have_one_winner(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'review.db'}"
    ledgers = [SubmissionLedger(url) for _ in range(4)]  # four "replicas", one database
    ledgers[0].claim(SubmissionKey("t", "warm-up", "r"), FORM, NOW)  # the schema, made once
    barrier = Barrier(4)

    def claim(ledger: SubmissionLedger) -> bool:
        barrier.wait()
        return ledger.claim(KEY, FORM, NOW).won

    with ThreadPoolExecutor(4) as pool:
        won = list(pool.map(claim, ledgers))
    for each in ledgers:
        each.close()
    assert sorted(won) == [False, False, False, True]


def test_a_lost_claim_names_the_form_that_holds_it(ledger: SubmissionLedger) -> None:
    first = ledger.claim(KEY, FORM, NOW)
    assert first.won and first.label_id == form_label_id(KEY, FORM)
    again = ledger.claim(KEY, FORM, NOW)
    assert not again.won and again.form_token == FORM and again.label_id == first.label_id
    ledger.published(KEY, FORM)
    other = ledger.claim(KEY, OTHER, NOW)
    assert not other.won and other.form_token == FORM and other.state == "published"
    # another reviewer, or the same answer id of another tenant, is another key
    assert ledger.claim(SubmissionKey("acme", "a1", "bob"), FORM, NOW).won
    assert ledger.claim(SubmissionKey("globex", "a1", "alice"), FORM, NOW).won


def test_a_released_claim_may_be_made_again(ledger: SubmissionLedger) -> None:
    assert ledger.claim(KEY, FORM, NOW).won
    ledger.release(KEY, OTHER)  # not its form: nothing happens
    assert not ledger.claim(KEY, OTHER, NOW).won
    ledger.release(KEY, FORM)
    assert ledger.claim(KEY, OTHER, NOW).won


def test_a_claim_left_publishing_is_taken_over_after_stale_s(ledger: SubmissionLedger) -> None:
    assert ledger.claim(KEY, FORM, NOW).won
    assert not ledger.claim(KEY, FORM, NOW + timedelta(seconds=119)).won
    taken = ledger.claim(KEY, FORM, NOW + timedelta(seconds=121))
    assert taken.won and taken.label_id == form_label_id(KEY, FORM), "a replay keeps its id"
    ledger.published(KEY, FORM)
    assert not ledger.claim(KEY, OTHER, NOW + timedelta(seconds=600)).won, "published stays"


def test_claims_are_forgotten_after_memory_s(tmp_path: Path) -> None:
    with SubmissionLedger(f"sqlite:///{tmp_path / 'r.db'}", memory_s=60) as ledger:
        assert ledger.claim(KEY, FORM, NOW).won
        ledger.published(KEY, FORM)
        assert not ledger.claim(KEY, OTHER, NOW + timedelta(seconds=59)).won
        assert ledger.claim(KEY, OTHER, NOW + timedelta(seconds=61)).won


def test_label_ids_differ_by_form_and_key() -> None:
    ids = {
        form_label_id(KEY, FORM),
        form_label_id(KEY, OTHER),
        form_label_id(SubmissionKey("globex", "a1", "alice"), FORM),
        form_label_id(SubmissionKey("acme", "a1", "bob"), FORM),
    }
    assert len(ids) == 4 and form_label_id(KEY, FORM) == form_label_id(KEY, FORM)


def test_the_form_token_pattern() -> None:
    assert FORM_TOKEN.fullmatch(FORM) and FORM_TOKEN.fullmatch("A-_9" * 4)
    for bad in ("short", "x" * 65, "f" * 20 + "<>", "f" * 20 + "\n"):
        assert FORM_TOKEN.fullmatch(bad) is None


async def test_keyed_locks_serialise_one_key_and_forget_it_after() -> None:
    locks = KeyedLocks()
    inside = 0
    most = 0

    async def hold(key: str) -> None:
        nonlocal inside, most
        async with locks.hold(key):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(hold("k") for _ in range(4)))
    assert most == 1 and len(locks) == 0
    inside = most = 0
    await asyncio.gather(hold("a"), hold("b"))
    assert most == 2 and len(locks) == 0
