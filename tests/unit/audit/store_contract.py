"""What every audit store must do, whatever its database: a test class that SQLite
(unit tests) and a real PostgreSQL server (integration tests) both inherit, each giving
it a ``store`` fixture on an empty database."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import create_engine, text

from streamproc.audit import AuditRecord, Checkpoint, canonical_json, leaf_hash
from streamproc.audit.store import AuditQuery, AuditStore, PartitionCheck
from streamproc.contracts.events import Action
from tests.unit.audit.audit_samples import EVIDENCE_TEXT, NOW, make_records
from tests.unit.audit.keys import SIGNER

__all__ = ["StoreContract", "sql"]


def sql(store: AuditStore, statement: str, **params: object) -> int:
    """Run SQL on the store's database behind its back, as a tamperer would."""
    engine = create_engine(store.url)
    try:
        with engine.begin() as conn:
            return int(conn.execute(text(statement), params).rowcount)
    finally:
        engine.dispose()


def append(
    store: AuditStore,
    partition: int,
    records: list[AuditRecord],
    first_offset: int = 0,
    checkpoint_every: int | None = None,
) -> list[str]:
    entries = [(first_offset + i, r.model_dump_json().encode()) for i, r in enumerate(records)]
    return store.append(partition, entries, checkpoint_every=checkpoint_every, now=NOW).stored


def only(report_problem: PartitionCheck | None) -> PartitionCheck:
    assert report_problem is not None, "verification should have failed"
    assert report_problem.problem is not None
    return report_problem


class StoreContract:
    """Inherit and provide ``store``."""

    def test_a_stored_record_comes_back_whole_with_its_event_bytes(self, store: AuditStore) -> None:
        records = make_records(3)
        assert append(store, 0, records) == ["ans-0", "ans-1", "ans-2"]
        stored = store.get("ans-2")
        assert stored is not None and stored.record == records[2]
        assert stored.record.event_bytes() == records[2].event_bytes()
        summary = stored.summary
        assert (summary.partition, summary.seq, summary.offset) == (0, 3, 2)
        assert summary.action == "withhold" and summary.hallucinated
        assert summary.occurred_at == records[2].occurred_at
        assert stored.record_json is not None
        assert leaf_hash(stored.record_json.encode()).hex() == stored.leaf_hash
        assert store.get("missing") is None
        assert store.head(0) == (3, stored.chain_hash)

    def test_a_redelivered_answer_is_stored_once(self, store: AuditStore) -> None:
        records = make_records(4)
        append(store, 0, records[:3])
        entries = [(i, r.model_dump_json().encode()) for i, r in enumerate(records)]
        again = store.append(0, entries)
        assert again.duplicates == ["ans-0", "ans-1", "ans-2"] and again.stored == ["ans-3"]
        # a copy in the same batch, or on another partition, counts too
        twice = store.append(1, [(0, records[0]), (1, records[0])])
        assert twice.stored == [] and twice.duplicates == ["ans-0", "ans-0"]
        assert len(store.find(limit=None)) == 4
        assert store.verify().ok

    def test_a_value_that_is_no_audit_record_is_reported_not_stored(
        self, store: AuditStore
    ) -> None:
        [record] = make_records(1)
        done = store.append(0, [(0, b"{not json"), (1, b'{"answer_id": "x"}'), (2, record)])
        assert [offset for offset, _ in done.rejected] == [0, 1]
        assert done.stored == ["ans-0"] and store.head(0)[0] == 1

    def test_a_rejection_never_quotes_the_record(self, store: AuditStore) -> None:
        [record] = make_records(1)
        document = json.loads(record.model_dump_json())
        broken = json.dumps({**document, "judgement": {"claims": EVIDENCE_TEXT}}).encode()
        not_finite = json.dumps({**document, "answer_id": "nan", "x": float("nan")}).encode()
        done = store.append(0, [(0, broken), (1, not_finite)])
        assert done.stored == []
        [(_, why_broken), (_, why_nan)] = done.rejected
        assert "judgement" in why_broken and EVIDENCE_TEXT not in why_broken
        assert "Köln" not in why_broken and why_nan.startswith("unreadable")

    def test_find_filters_by_each_column(self, store: AuditStore) -> None:
        append(store, 0, make_records(6))
        append(store, 1, make_records(2, start=10, conversation="conv-2", tenant="globex"))
        assert [s.answer_id for s in store.find(AuditQuery(conversation="conv-2"))] == [
            "ans-11",
            "ans-10",
        ]
        assert {s.answer_id for s in store.find(AuditQuery(tenant="acme", hallucinated=True))} == {
            "ans-2",
            "ans-5",
        }
        withheld = {s.answer_id for s in store.find(AuditQuery(action=Action.WITHHOLD))}
        assert withheld == {"ans-2", "ans-5", "ans-11"}
        assert [
            s.answer_id for s in store.find(AuditQuery(action="withhold", tenant="globex"))
        ] == ["ans-11"]
        window = store.find(
            AuditQuery(since=NOW - timedelta(minutes=3), until=NOW - timedelta(minutes=1))
        )
        assert [s.answer_id for s in window] == ["ans-3", "ans-2"], "oldest first, until excluded"
        assert len(store.find(AuditQuery(assistant="helpdesk"), limit=3)) == 3
        assert store.find(AuditQuery(assistant="other")) == []
        in_partition_1 = store.find(AuditQuery(partition=1, action="withhold"))
        assert [s.answer_id for s in in_partition_1] == ["ans-11"]

    def test_export_lines_carry_what_an_outside_verifier_needs(self, store: AuditStore) -> None:
        append(store, 0, make_records(3))
        append(store, 1, make_records(2, start=3))
        lines = [stored.as_json() for stored in store.export()]
        assert [(line["partition"], line["seq"]) for line in lines] == [
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 1),
            (1, 2),
        ]
        for line in lines:
            assert leaf_hash(canonical_json(line["record"])).hex() == line["leaf_hash"]
        assert [s.summary.answer_id for s in store.export(AuditQuery(hallucinated=True))] == [
            "ans-2"
        ]

    def test_an_altered_record_is_named(self, store: AuditStore) -> None:
        append(store, 0, make_records(5))
        stored = store.get("ans-2")
        assert stored is not None and stored.record_json is not None
        forged = stored.record_json.replace('"withhold"', '"pass"').replace(
            '"hallucinated":true', '"hallucinated":false'
        )
        assert forged != stored.record_json
        assert (
            sql(
                store,
                "UPDATE audit_records SET record_json = :j WHERE answer_id = 'ans-2'",
                j=forged,
            )
            == 1
        )
        report = store.verify()
        check = only(report.first_problem)
        assert check.problem is not None
        assert (check.partition, check.problem.seq, check.problem.name) == (0, 3, "ans-2")
        assert check.problem.problem == "leaf_mismatch"
        assert "ans-2" in report.describe()

    def test_a_deleted_record_is_named(self, store: AuditStore) -> None:
        append(store, 0, make_records(6))
        assert sql(store, "DELETE FROM audit_records WHERE answer_id = 'ans-2'") == 1
        check = only(store.verify().first_problem)
        assert check.problem is not None
        assert (check.problem.seq, check.problem.problem, check.problem.name) == (
            4,
            "seq_gap",
            "ans-3",
        )
        assert "seq 3..3 missing" in check.problem.detail

    def test_a_cut_tail_is_caught_by_the_checkpoints(self, store: AuditStore) -> None:
        append(store, 0, make_records(12), checkpoint_every=5)
        assert [c.seq for c in store.checkpoints(0)] == [5, 10]
        topic_marks = {
            0: [Checkpoint(c.seq, bytes.fromhex(c.chain_hash)) for c in store.checkpoints(0)]
        }
        assert sql(store, "DELETE FROM audit_records WHERE seq > 8") == 4
        check = only(store.verify().first_problem)
        assert check.problem is not None
        assert (check.problem.seq, check.problem.problem) == (10, "truncated")
        # the tamperer removes the checkpoint rows too: the topic's copies still catch it
        sql(store, "DELETE FROM audit_checkpoints WHERE seq > 8")
        assert store.verify().ok, "nothing left in the store to notice"
        check = only(store.verify(extra_checkpoints=topic_marks).first_problem)
        assert check.problem is not None and check.problem.problem == "truncated"

    def test_a_purge_drops_texts_and_the_chain_still_verifies(self, store: AuditStore) -> None:
        append(store, 0, make_records(3, conversation="conv-a"), checkpoint_every=2)
        append(
            store,
            0,
            make_records(3, start=3, conversation="conv-b"),
            first_offset=3,
            checkpoint_every=2,
        )
        assert store.purge_conversation("conv-a", signer=SIGNER, now=NOW) == 3
        assert store.purge_conversation("conv-a", signer=SIGNER, now=NOW) == 0, "already purged"
        purged = store.get("ans-1")
        assert purged is not None and purged.record_json is None and purged.record is None
        assert purged.summary.purged_at == NOW
        kept = store.get("ans-4")
        assert kept is not None and kept.record is not None
        report = store.verify()
        assert report.ok, report.describe()
        [check] = report.partitions
        assert (check.checked, check.trusted_leaves, check.purges) == (7, 3, 1)
        assert "3 purged" in report.describe()
        # a purged row's hashes are still bound into the chain
        sql(store, "UPDATE audit_records SET leaf_hash = :h WHERE answer_id = 'ans-1'", h="0" * 64)
        check = only(store.verify().first_problem)
        assert check.problem is not None and check.problem.name == "ans-1"

    def test_expired_records_are_purged_by_event_time(self, store: AuditStore) -> None:
        old = make_records(2, occurred_at=NOW - timedelta(days=500))
        new = make_records(2, start=2, occurred_at=NOW - timedelta(days=1))
        append(store, 0, old + new)
        assert store.purge_expired(400, signer=SIGNER, now=NOW) == 2
        assert [s.answer_id for s in store.find(limit=None) if s.purged_at] == ["ans-0", "ans-1"]
        assert store.verify().ok

    def test_each_partition_is_its_own_chain_and_ranges_verify(self, store: AuditStore) -> None:
        append(store, 0, make_records(5))
        append(store, 1, make_records(3, start=5))
        report = store.verify()
        assert [(c.partition, c.checked) for c in report.partitions] == [(0, 5), (1, 3)]
        assert [
            c.checked for c in store.verify(partition=0, since_seq=2, until_seq=4).partitions
        ] == [3]
        sql(store, "DELETE FROM audit_records WHERE audit_partition = 0 AND seq = 2")
        assert store.verify(partition=0, since_seq=4).ok, "the damage lies before the range"
        assert not store.verify(partition=0, since_seq=3).ok, "its anchor is gone"
        assert store.verify(partition=1).ok
