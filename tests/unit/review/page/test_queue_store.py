"""The page's queue: each reviewer gets the oldest item of its tenants that it has not
labelled and that still wants labels; a seeded share of items wants one reviewer more."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamproc.review.page.auth import Reviewer
from streamproc.review.page.queue_store import ReviewQueueStore, wanted_labels
from tests.unit.review.page.samples import review_item

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def reviewer(name: str, *tenants: str) -> Reviewer:
    return Reviewer(name, frozenset(tenants), "0" * 64)


ALICE = reviewer("alice", "acme")
BOB = reviewer("bob", "acme", "globex")
GLOBEX_ONLY = reviewer("gina", "globex")


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[ReviewQueueStore]:
    with ReviewQueueStore(f"sqlite:///{tmp_path / 'review.db'}", labels_per_item=1) as store:
        yield store


def label(store: ReviewQueueStore, answer_id: str, who: Reviewer) -> bool:
    return store.record_label(answer_id, who.name, f"{answer_id}-{who.name}", NOW)


def test_items_come_oldest_first_and_only_of_the_reviewers_tenants(
    store: ReviewQueueStore,
) -> None:
    assert store.add([review_item("late", minutes=5), review_item("early", minutes=1)]) == 2
    store.add([review_item("other", tenant="globex", minutes=0)])
    assert store.next_item(ALICE).answer_id == "early"  # type: ignore[union-attr]
    assert store.next_item(GLOBEX_ONLY).answer_id == "other"  # type: ignore[union-attr]
    assert store.next_item(BOB).answer_id == "other"  # type: ignore[union-attr]
    assert store.waiting(ALICE) == 2 and store.waiting(BOB) == 3


def test_a_labelled_item_leaves_the_queue_once_it_has_its_labels(
    store: ReviewQueueStore,
) -> None:
    store.add([review_item("a1", minutes=1), review_item("a2", minutes=2)])
    assert label(store, "a1", ALICE)
    # Wanted once: labelled by alice, it is done for everyone.
    assert store.next_item(ALICE).answer_id == "a2"  # type: ignore[union-attr]
    assert store.next_item(BOB).answer_id == "a2"  # type: ignore[union-attr]
    assert label(store, "a2", BOB)
    assert store.next_item(ALICE) is None and store.waiting(ALICE) == 0
    assert store.labels_of("a1") == ["alice"]


def test_a_reviewer_labels_an_answer_once(store: ReviewQueueStore) -> None:
    store.add([review_item("a1")])
    assert label(store, "a1", ALICE)
    assert not store.record_label("a1", "alice", "another-label-id", NOW)
    assert store.has_labelled("a1", "alice") and not store.has_labelled("a1", "bob")


def test_a_doubly_wanted_item_goes_to_a_second_reviewer_but_not_twice_to_one(
    tmp_path: Path,
) -> None:
    with ReviewQueueStore(
        f"sqlite:///{tmp_path / 'r.db'}", labels_per_item=1, second_label_share=1.0
    ) as store:
        store.add([review_item("a1")])
        assert store.wanted("a1") == 2
        assert label(store, "a1", ALICE)
        assert store.next_item(ALICE) is None
        assert store.next_item(BOB).answer_id == "a1"  # type: ignore[union-attr]
        assert label(store, "a1", BOB)
        assert store.next_item(BOB) is None
        assert store.labels_of("a1") == ["alice", "bob"]


def test_the_second_label_share_is_seeded_and_about_the_setting() -> None:
    ids = [f"answer-{i}" for i in range(4000)]
    draws = [wanted_labels(i, labels_per_item=2, second_label_share=0.1, seed=7) for i in ids]
    assert set(draws) == {2, 3}
    assert 0.08 < draws.count(3) / len(ids) < 0.12
    again = [wanted_labels(i, labels_per_item=2, second_label_share=0.1, seed=7) for i in ids]
    other_seed = [wanted_labels(i, labels_per_item=2, second_label_share=0.1, seed=8) for i in ids]
    assert again == draws and other_seed != draws
    assert all(
        wanted_labels(i, labels_per_item=1, second_label_share=0.0, seed=7) == 1 for i in ids
    )


def test_a_redelivered_item_is_queued_once(store: ReviewQueueStore) -> None:
    item = review_item("a1")
    assert store.add([item, item]) == 1
    assert store.add([item, review_item("a2")]) == 1
    assert store.waiting(BOB) == 2


def test_a_skipped_item_comes_back_after_the_rest(store: ReviewQueueStore) -> None:
    store.add(
        [review_item("a1", minutes=1), review_item("a2", minutes=2), review_item("a3", minutes=3)]
    )
    store.skip("a1", "alice", at=NOW)
    assert store.next_item(ALICE).answer_id == "a2"  # type: ignore[union-attr]
    store.skip("a2", "alice", at=NOW.replace(hour=1))
    assert store.next_item(ALICE).answer_id == "a3"  # type: ignore[union-attr]
    label(store, "a3", ALICE)
    assert store.next_item(ALICE).answer_id == "a1"  # type: ignore[union-attr]
    store.skip("a1", "alice", at=NOW.replace(hour=2))  # skipped again: after a2 now
    assert store.next_item(ALICE).answer_id == "a2"  # type: ignore[union-attr]
    # Skips are per reviewer.
    assert store.next_item(BOB).answer_id == "a1"  # type: ignore[union-attr]


def test_another_tenants_item_is_not_found(store: ReviewQueueStore) -> None:
    store.add([review_item("g1", tenant="globex")])
    assert store.item_for(ALICE, "g1") is None
    assert store.item_for(ALICE, "unknown") is None
    found = store.item_for(GLOBEX_ONLY, "g1")
    assert found is not None and found == review_item("g1", tenant="globex")


def test_two_tenants_items_of_one_answer_id_are_both_queued_whoever_comes_first(
    store: ReviewQueueStore,
) -> None:
    # globex sends acme's answer id first: acme's own item must still be queued.
    assert store.add([review_item("a1", tenant="globex", minutes=0)]) == 1
    assert store.add([review_item("a1", tenant="acme", minutes=1)]) == 1
    assert store.add([review_item("a1", tenant="acme")]) == 0  # a redelivery stays one

    acme = store.item_for(ALICE, "a1")
    assert acme is not None and acme.tenant == "acme"
    assert store.next_item(GLOBEX_ONLY).tenant == "globex"  # type: ignore[union-attr]
    assert store.item_for(BOB, "a1", "globex").tenant == "globex"  # type: ignore[union-attr]
    assert store.item_for(ALICE, "a1", "globex") is None  # not alice's tenant

    # A label of one tenant's item leaves the other's open.
    assert store.record_label("a1", "bob", "l-globex", NOW, tenant="globex")
    assert store.record_label("a1", "bob", "l-acme", NOW, tenant="acme")
    assert not store.record_label("a1", "bob", "l-again", NOW, tenant="acme")
    assert store.labels_of("a1", tenant="globex") == ["bob"]
    assert store.has_labelled("a1", "bob", tenant="acme")
    assert not store.has_labelled("a1", "alice", tenant="acme")
    assert store.waiting(ALICE) == 0 and store.waiting(GLOBEX_ONLY) == 0


def test_a_skip_holds_for_its_tenants_item_only(store: ReviewQueueStore) -> None:
    store.add([review_item("a1", tenant="acme", minutes=1)])
    store.add([review_item("a1", tenant="globex", minutes=2), review_item("b", minutes=3)])
    store.skip("a1", "bob", at=NOW, tenant="acme")
    first = store.next_item(BOB)
    assert first is not None and (first.tenant, first.answer_id) == ("globex", "a1")


def test_a_store_keyed_by_answer_id_alone_is_upgraded_on_first_use(tmp_path: Path) -> None:
    """The tables of the earlier layout are copied over (a label takes its item's
    tenant) and dropped; the queue goes on as it was."""
    import sqlite3

    path = tmp_path / "old.db"
    item = review_item("a1", tenant="globex")
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE review_items (answer_id VARCHAR(200) PRIMARY KEY, tenant VARCHAR(200),
              assistant_id VARCHAR(200), task_type VARCHAR(200), sampled_because VARCHAR(16),
              judged_at DATETIME, received_at DATETIME, wanted_labels INTEGER, item_json TEXT);
            CREATE TABLE review_labels (label_id VARCHAR(200) PRIMARY KEY,
              answer_id VARCHAR(200), reviewer VARCHAR(200), labelled_at DATETIME);
            CREATE TABLE review_skips (answer_id VARCHAR(200), reviewer VARCHAR(200),
              skipped_at DATETIME, PRIMARY KEY (answer_id, reviewer));
            """
        )
        db.execute(
            "INSERT INTO review_items VALUES ('a1', 'globex', 'bot', NULL, 'flagged', "
            "'2026-01-02 00:00:00', '2026-01-02 00:00:00', 2, ?)",
            (item.model_dump_json(),),
        )
        db.execute("INSERT INTO review_labels VALUES ('l1', 'a1', 'bob', '2026-01-02 00:00:00')")
    with ReviewQueueStore(f"sqlite:///{path}") as store:
        assert store.labels_of("a1", tenant="globex") == ["bob"]
        assert store.wanted("a1", tenant="globex") == 2
        assert store.next_item(GLOBEX_ONLY) == item  # wants 2, labelled by bob only
        assert store.next_item(BOB) is None
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert not tables & {"review_items", "review_labels", "review_skips"}
