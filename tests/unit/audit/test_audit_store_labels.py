"""Reviewers' labels in the audit store: one chain with the records of their partition,
deduplicated by label id, verified like records, purged with their answer. The contract
runs on SQLite here and on a real PostgreSQL server in
tests/integration/test_audit_store_postgres.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from streamproc.audit import AuditRecord, Checkpoint, canonical_json, leaf_hash
from streamproc.audit.store import (
    AuditQuery,
    AuditStore,
    StoredLabel,
    StoredPurge,
    StoredRecord,
)
from streamproc.contracts.label_events import ClaimLabelValue, LabelAuditEntry
from tests.unit.audit.audit_samples import NOW, make_records
from tests.unit.audit.keys import SIGNER
from tests.unit.audit.label_samples import NOTE, label_bytes, make_label
from tests.unit.audit.store_contract import only, sql

__all__ = ["LabelStoreContract"]

Entry = AuditRecord | LabelAuditEntry


def values(items: Sequence[Entry], first_offset: int = 0) -> list[tuple[int, bytes]]:
    return [(first_offset + i, item.model_dump_json().encode()) for i, item in enumerate(items)]


def mixed(store: AuditStore) -> tuple[list[AuditRecord], list[LabelAuditEntry]]:
    """Partition 0: r0 r1 L(ans-0) r2 L(ans-2) L(ans-2, bob): seqs 1..6."""
    records = make_records(3)
    labels = [
        make_label(records[0], "L0"),
        make_label(
            records[2],
            "L2",
            answer_label="faithful",
            claims={0: ClaimLabelValue.SUPPORTED},
        ),
        make_label(records[2], "L2b", reviewer="bob", answer_label="hallucinated", hours_later=2),
    ]
    items: list[Entry] = [records[0], records[1], labels[0], records[2], labels[1], labels[2]]
    done = store.append(0, values(items), now=NOW)
    assert done.stored == ["ans-0", "ans-1", "ans-2"]
    assert done.labels_stored == ["L0", "L2", "L2b"]
    assert done.rejected == []
    return records, labels


class LabelStoreContract:
    """Inherit and provide ``store`` (an empty database)."""

    def test_labels_take_their_place_in_the_partitions_chain(self, store: AuditStore) -> None:
        _, labels = mixed(store)
        [l2, l2b] = store.labels_for("ans-2")
        assert (l2.partition, l2.seq, l2.offset) == (0, 5, 4)
        assert (l2.label_id, l2.answer_id, l2.tenant, l2.reviewer) == (
            "L2",
            "ans-2",
            "acme",
            "alice",
        )
        assert (l2.answer_label, l2.agrees_with_judge) == ("faithful", False)
        assert l2.labelled_at == NOW + timedelta(hours=1) and l2.stored_at == NOW
        assert l2.entry == labels[1] and l2.entry.label.note == NOTE
        assert l2.entry_json is not None
        assert leaf_hash(l2.entry_json.encode()).hex() == l2.leaf_hash
        assert l2.prev_hash == _chain_hash_at(store, 4)
        assert (l2b.reviewer, l2b.answer_label, l2b.agrees_with_judge) == (
            "bob",
            "hallucinated",
            True,
        )
        assert store.head(0) == (6, l2b.chain_hash), "a label can be the head"
        record = store.get("ans-2")
        assert record is not None and record.summary.seq == 4
        assert store.labels_for("ans-1") == [] and store.labels_for("nope") == []
        # the next record follows the label
        more = store.append(0, values([make_records(1, start=3)[0]], 6), now=NOW)
        assert more.stored == ["ans-3"] and store.head(0)[0] == 7
        next_record = store.get("ans-3")
        assert next_record is not None and next_record.prev_hash == l2b.chain_hash
        report = store.verify()
        assert report.ok, report.describe()
        [check] = report.partitions
        assert (check.checked, check.records, check.labels) == (7, 4, 3)
        assert "4 records and 3 labels checked through seq 7" in report.describe()

    def test_a_redelivered_label_is_stored_once(self, store: AuditStore) -> None:
        records, labels = mixed(store)
        head = store.head(0)
        again = store.append(
            0,
            values([records[0], records[1], labels[0], records[2], labels[1], labels[2]]),
            now=NOW,
        )
        assert again.stored == [] and again.labels_stored == []
        assert again.label_duplicates == ["L0", "L2", "L2b"]
        assert store.head(0) == head, "a redelivered batch changes nothing"
        # the same label in one batch twice, or on another partition, counts too
        twice = store.append(1, [(0, labels[0]), (1, label_bytes(labels[0]))], now=NOW)
        assert twice.labels_stored == [] and twice.label_duplicates == ["L0", "L0"]
        assert store.head(1)[0] == 0
        assert [stored.label_id for stored in store.labels_for("ans-0")] == ["L0"]
        assert store.verify().ok

    def test_checkpoints_count_label_seqs(self, store: AuditStore) -> None:
        records = make_records(2)
        items: list[Entry] = [
            records[0],
            make_label(records[0], "A"),
            records[1],
            make_label(records[1], "B"),
        ]
        done = store.append(0, values(items), checkpoint_every=2, now=NOW)
        assert [mark.seq for mark in done.checkpoints] == [2, 4]
        heads = {label.seq: label.chain_hash for label in store.labels_for("ans-1")}
        heads |= {label.seq: label.chain_hash for label in store.labels_for("ans-0")}
        assert [(c.seq, c.chain_hash) for c in store.checkpoints(0)] == [
            (2, heads[2]),
            (4, heads[4]),
        ]

    def test_an_unreadable_label_entry_is_reported_without_its_note(
        self, store: AuditStore
    ) -> None:
        [record] = make_records(1)
        document = json.loads(label_bytes(make_label(record, "L")))
        del document["judge_hallucinated"]
        done = store.append(0, [(0, json.dumps(document).encode()), (1, record)], now=NOW)
        [(offset, why)] = done.rejected
        assert offset == 0 and why.startswith("not a label entry") and "judge_hallucinated" in why
        assert NOTE not in why and "depot" not in why
        assert done.stored == ["ans-0"] and store.labels_for("ans-0") == []

    def test_a_newer_entrys_unknown_fields_are_kept_and_hashed(self, store: AuditStore) -> None:
        [record] = make_records(1)
        document = json.loads(label_bytes(make_label(record, "L")))
        document["reviewed_with"] = "v2 page"
        done = store.append(0, [(0, record), (1, json.dumps(document).encode())], now=NOW)
        assert done.labels_stored == ["L"]
        [stored] = store.labels_for("ans-0")
        assert stored.entry_json == canonical_json(document).decode()
        assert stored.entry is not None and stored.entry.label.label_id == "L"
        assert store.verify().ok

    def test_an_altered_label_is_named(self, store: AuditStore) -> None:
        mixed(store)
        [l2, _] = store.labels_for("ans-2")
        assert l2.entry_json is not None
        forged = l2.entry_json.replace('"agrees_with_judge":false', '"agrees_with_judge":true')
        assert forged != l2.entry_json
        assert (
            sql(store, "UPDATE audit_labels SET entry_json = :j WHERE label_id = 'L2'", j=forged)
            == 1
        )
        report = store.verify()
        check = only(report.first_problem)
        assert check.problem is not None
        assert (check.partition, check.problem.seq, check.problem.problem) == (
            0,
            5,
            "leaf_mismatch",
        )
        assert (check.problem.name, check.problem.label_id) == ("ans-2", "L2")
        assert "label L2 of answer ans-2" in report.describe()
        assert (check.records, check.labels) == (3, 1), "verified up to the altered label"

    def test_a_deleted_label_leaves_a_gap(self, store: AuditStore) -> None:
        mixed(store)
        assert sql(store, "DELETE FROM audit_labels WHERE label_id = 'L0'") == 1
        check = only(store.verify().first_problem)
        assert check.problem is not None
        assert (check.problem.seq, check.problem.problem) == (4, "seq_gap")
        assert (check.problem.name, check.problem.label_id) == ("ans-2", None)
        assert "seq 3..3 missing" in check.problem.detail

    def test_a_cut_tail_of_labels_is_caught_by_the_checkpoints(self, store: AuditStore) -> None:
        records = make_records(2)
        items: list[Entry] = [records[0], records[1]] + [
            make_label(records[i % 2], f"L{i}", hours_later=i + 1) for i in range(6)
        ]
        store.append(0, values(items), checkpoint_every=3, now=NOW)
        assert [c.seq for c in store.checkpoints(0)] == [3, 6]
        topic_marks = {
            0: [Checkpoint(c.seq, bytes.fromhex(c.chain_hash)) for c in store.checkpoints(0)]
        }
        assert sql(store, "DELETE FROM audit_labels WHERE seq > 4") == 4
        check = only(store.verify().first_problem)
        assert check.problem is not None
        assert (check.problem.seq, check.problem.problem) == (6, "truncated")
        sql(store, "DELETE FROM audit_checkpoints WHERE seq > 4")
        assert store.verify().ok, "nothing left in the store to notice"
        check = only(store.verify(extra_checkpoints=topic_marks).first_problem)
        assert check.problem is not None and check.problem.problem == "truncated"

    def test_a_label_sharing_a_records_seq_breaks_the_chain(self, store: AuditStore) -> None:
        """What a race between two writers would leave, were appends not taking turns."""
        mixed(store)
        sql(store, "UPDATE audit_labels SET seq = 2 WHERE label_id = 'L0'")
        check = only(store.verify().first_problem)
        assert check.problem is not None and check.problem.problem == "seq_gap"
        assert "repeated or out of order" in check.problem.detail

    def test_writers_appending_records_and_labels_at_once_keep_one_chain(
        self, store: AuditStore
    ) -> None:
        """Records and labels live in two tables, so no primary key stops a record and
        a label from both taking the next seq: appends must take turns."""
        rounds = 10
        records = make_records(rounds)
        batches: list[list[Entry]] = [
            list(records),  # one writer appends the records ...
            [make_label(r, f"A-{r.answer_id}") for r in records],  # ... two the labels
            [make_label(r, f"B-{r.answer_id}", reviewer="bob") for r in records],
        ]
        writers = [AuditStore(store.url) for _ in batches]
        barrier = threading.Barrier(len(writers))
        failures: list[BaseException] = []

        def write(index: int) -> None:
            try:
                for n, item in enumerate(batches[index]):
                    barrier.wait()
                    writers[index].append(0, [(100 * index + n, item)], now=NOW)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                failures.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for writer in writers:
            writer.close()
        assert failures == []
        report = store.verify()
        assert report.ok, report.describe()
        [check] = report.partitions
        assert (check.records, check.labels, check.last_seq) == (rounds, 2 * rounds, 3 * rounds)

    def test_a_purge_drops_label_notes_and_keeps_the_chain(self, store: AuditStore) -> None:
        conv_a = make_records(2, conversation="conv-a")
        conv_b = make_records(1, start=2, conversation="conv-b")
        items: list[Entry] = [*conv_a, make_label(conv_a[1], "A1"), *conv_b]
        items.append(make_label(conv_b[0], "B0"))
        store.append(0, values(items), now=NOW)
        later = NOW + timedelta(days=1)
        assert store.purge_conversation("conv-a", signer=SIGNER, now=later) == 2
        [purged] = store.labels_for("ans-1")
        assert purged.entry_json is None and purged.entry is None and purged.purged_at == later
        assert (purged.reviewer, purged.answer_label, purged.agrees_with_judge) == (
            "alice",
            "faithful",
            True,
        ), "who said what stays; only the entry (the note) goes"
        [kept] = store.labels_for("ans-2")
        assert kept.entry is not None and kept.purged_at is None
        # a label arriving after its answer was purged is stored purged
        late = store.append(0, [(10, make_label(conv_a[0], "A0-late"))], signer=SIGNER, now=later)
        assert late.labels_stored == ["A0-late"]
        [stored_late] = store.labels_for("ans-0")
        assert stored_late.entry_json is None and stored_late.purged_at == later
        report = store.verify()
        assert report.ok, report.describe()
        [check] = report.partitions
        assert (check.checked, check.labels, check.purges, check.trusted_leaves) == (8, 3, 2, 4)
        sql(store, "UPDATE audit_labels SET leaf_hash = :h WHERE label_id = 'A1'", h="0" * 64)
        check = only(store.verify().first_problem)
        assert check.problem is not None and check.problem.label_id == "A1"

    def test_expired_answers_take_their_labels_along(self, store: AuditStore) -> None:
        old = make_records(1, occurred_at=NOW - timedelta(days=500))
        new = make_records(1, start=1, occurred_at=NOW - timedelta(days=1))
        items: list[Entry] = [*old, *new, make_label(old[0], "old"), make_label(new[0], "new")]
        store.append(0, values(items), now=NOW)
        assert store.purge_expired(400, signer=SIGNER, now=NOW) == 1
        assert [label.entry_json is None for label in store.labels_for("ans-0")] == [True]
        assert [label.entry_json is None for label in store.labels_for("ans-1")] == [False]
        assert store.verify().ok

    def test_export_entries_is_every_link_in_chain_order(self, store: AuditStore) -> None:
        mixed(store)
        other = make_records(1, start=6, conversation="conv-2")
        store.append(1, values([*other, make_label(other[0], "X")]), now=NOW)
        lines = [entry.as_json() for entry in store.export_entries()]
        assert [(line["partition"], line["seq"], line.get("kind")) for line in lines] == [
            (0, 1, None),
            (0, 2, None),
            (0, 3, "audit_label"),
            (0, 4, None),
            (0, 5, "audit_label"),
            (0, 6, "audit_label"),
            (1, 1, None),
            (1, 2, "audit_label"),
        ]
        for line in lines:
            body = line["entry"] if line.get("kind") == "audit_label" else line["record"]
            assert leaf_hash(canonical_json(body)).hex() == line["leaf_hash"]
        # a record filter brings the labels of the answers it matches
        chosen = list(store.export_entries(AuditQuery(hallucinated=True)))
        assert [_name(entry) for entry in chosen] == ["ans-2", "L2", "L2b"]
        assert [_name(entry) for entry in store.export_entries(AuditQuery(partition=1))] == [
            "ans-6",
            "X",
        ]


def _name(entry: StoredRecord | StoredLabel | StoredPurge) -> str:
    if isinstance(entry, StoredPurge):
        return entry.purge_id
    return entry.label_id if isinstance(entry, StoredLabel) else entry.summary.answer_id


def _chain_hash_at(store: AuditStore, seq: int) -> str:
    for entry in store.export_entries(AuditQuery(partition=0)):
        if (entry.summary.seq if isinstance(entry, StoredRecord) else entry.seq) == seq:
            return entry.chain_hash
    raise AssertionError(f"no seq {seq}")


class TestSqliteLabels(LabelStoreContract):
    @pytest.fixture()
    def store(self, tmp_path: Path) -> Iterator[AuditStore]:
        with AuditStore(f"sqlite:///{tmp_path / 'audit.db'}") as store:
            yield store


def test_a_store_from_before_labels_gains_the_table_on_first_use(tmp_path: Path) -> None:
    """A 0.1.0 store has audit_records and audit_checkpoints only."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with AuditStore(url) as store:
        store.append(0, values(make_records(2)), now=NOW)
    sql(store, "DROP TABLE audit_labels")
    sql(store, "DROP TABLE audit_chain_locks")
    with AuditStore(url) as reopened:
        records = make_records(2)
        done = reopened.append(0, [(2, make_label(records[1], "L"))], now=NOW)
        assert done.labels_stored == ["L"]
        assert reopened.verify().ok and reopened.head(0)[0] == 3
    engine = create_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"audit_records", "audit_labels", "audit_chain_locks"} <= tables


def test_reads_in_pages_smaller_than_a_chain_see_every_link_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exports and verification page by (partition, seq): a page boundary inside a
    partition and one between partitions lose and repeat nothing."""
    with AuditStore(f"sqlite:///{tmp_path / 'paged.db'}") as store:
        mixed(store)
        other = make_records(3, start=6, conversation="conv-2")
        store.append(1, values([*other, make_label(other[0], "X")]), now=NOW)
        whole = [_name(entry) for entry in store.export_entries()]
        checked = [(c.partition, c.records, c.labels) for c in store.verify().partitions]
        middle = store.verify(0, since_seq=2, until_seq=5).partitions[0]
        monkeypatch.setattr("streamproc.audit.store._read._PAGE", 2)
        assert [_name(entry) for entry in store.export_entries()] == whole
        assert len(whole) == 10 and len(set(whole)) == 10
        assert [_name(e) for e in store.export(AuditQuery(partition=1))] == [
            "ans-6",
            "ans-7",
            "ans-8",
        ]
        assert [label.label_id for label in store.export_labels()] == ["L0", "L2", "L2b", "X"]
        paged = store.verify()
        assert paged.ok
        assert [(c.partition, c.records, c.labels) for c in paged.partitions] == checked
        assert checked == [(0, 3, 3), (1, 3, 1)]
        again = store.verify(0, since_seq=2, until_seq=5).partitions[0]
        assert (again.checked, again.labels, again.last_seq) == (4, 2, 5)
        assert (middle.checked, middle.labels, middle.last_seq) == (4, 2, 5)
