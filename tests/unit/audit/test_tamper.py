"""Every way a tamperer with write access to the store (and no signing key) can try to
change what auditors read, on SQLite: each is caught by ``verify``, and ``show`` prints
what the hashed record says, not an edited column."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.audit import canonical_json, leaf_hash
from streamproc.audit.anchors import parse_checkpoint
from streamproc.audit.store import AmbiguousAnswer, AuditStore, PartitionCheck
from streamproc.cli.main import main
from tests.unit.audit.audit_samples import NOW, make_records
from tests.unit.audit.keys import CHECKER, FORGER, SIGNER, write_key_files
from tests.unit.audit.label_samples import make_label
from tests.unit.audit.old_store import make_old_store
from tests.unit.audit.store_contract import sql
from tests.unit.audit.tamper import append_forged_purge, rewrite_chain


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[AuditStore]:
    with AuditStore(f"sqlite:///{tmp_path / 'audit.db'}") as store:
        yield store


def fill(store: AuditStore, count: int = 12, every: int = 5) -> None:
    """``count`` records on partition 0, a label of ans-2, signed checkpoints every
    ``every`` links."""
    records = make_records(count)
    entries: list[tuple[int, bytes]] = [
        (i, r.model_dump_json().encode()) for i, r in enumerate(records)
    ]
    label = make_label(records[2], "L-2", answer_label="hallucinated")
    entries.insert(3, (100, label.model_dump_json().encode()))
    store.append(0, entries, checkpoint_every=every, signer=SIGNER, now=NOW)


def broken(store: AuditStore, **options: object) -> PartitionCheck:
    report = store.verify(checker=CHECKER, **options)  # type: ignore[arg-type]
    check = report.first_problem
    assert check is not None and check.problem is not None, report.describe()
    return check


def show(store: AuditStore, capsys: pytest.CaptureFixture[str], answer_id: str) -> str:
    assert main(["audit", "show", answer_id, "--plain", "--store", store.url]) == 0
    return capsys.readouterr().out


def test_an_untouched_store_verifies_and_says_what_is_not_yet_anchored(
    store: AuditStore,
) -> None:
    fill(store)  # 13 links, checkpoints at 5 and 10
    report = store.verify(checker=CHECKER)
    assert report.ok, report.describe()
    [check] = report.partitions
    assert (check.checked, check.anchored_seq, check.unanchored) == (13, 10, 3)
    assert "the 3 links after seq 10 are not yet anchored" in report.describe()
    assert report.not_proven == ["partition 0: the 3 links after seq 10 are not yet anchored"]
    unkeyed = store.verify()
    assert unkeyed.ok and not unkeyed.signatures_checked
    assert "no public key given" in unkeyed.not_proven[0]


def test_edited_json_is_caught(store: AuditStore) -> None:
    fill(store)
    sql(
        store,
        "UPDATE audit_records SET record_json = replace(record_json, '\"withhold\"', '\"pass\"') "
        "WHERE answer_id = 'ans-2'",
    )
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.name, check.problem.problem) == ("ans-2", "leaf_mismatch")


@pytest.mark.parametrize(
    ("column", "value", "hashed"),
    [
        ("action", "'pass'", "'withhold'"),
        ("hallucinated", "0", "True"),
        ("conversation_id", "'conv-forged'", "'conv-1'"),
    ],
)
def test_an_edited_record_column_is_caught_and_never_shown(
    store: AuditStore, capsys: pytest.CaptureFixture[str], column: str, value: str, hashed: str
) -> None:
    fill(store)
    assert sql(store, f"UPDATE audit_records SET {column} = {value} WHERE answer_id = 'ans-2'")
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.name, check.problem.problem) == ("ans-2", "column_mismatch")
    assert f"column {column} reads" in check.problem.detail
    assert f"the hashed record says {hashed}" in check.problem.detail
    shown = show(store, capsys, "ans-2")
    assert "action: withhold" in shown and "hallucinated: true" in shown
    assert "conversation_id: conv-1" in shown and "conv-forged" not in shown
    stored = store.get("ans-2")
    assert stored is not None and stored.summary.action == "withhold"


def test_an_edited_label_column_is_caught_and_never_shown(
    store: AuditStore, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(store)
    assert sql(store, "UPDATE audit_labels SET answer_label = 'faithful' WHERE label_id = 'L-2'")
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.label_id, check.problem.problem) == ("L-2", "column_mismatch")
    assert "column answer_label reads 'faithful'" in check.problem.detail
    assert "by alice at 2026-03-02T13:00:00+00:00: hallucinated" in show(store, capsys, "ans-2")


def test_a_deleted_middle_record_is_caught(store: AuditStore) -> None:
    fill(store)
    assert sql(store, "DELETE FROM audit_records WHERE answer_id = 'ans-5'") == 1
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.seq, check.problem.problem) == (8, "seq_gap")


def test_a_cut_tail_is_caught_by_the_checkpoints_kept_apart(
    store: AuditStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(store)
    kept = tmp_path / "checkpoints.jsonl"
    assert main(["audit", "checkpoints", "-o", str(kept), "--store", store.url]) == 0
    outside = {0: [parse_checkpoint(json.loads(line)) for line in kept.read_text().splitlines()]}
    assert all(mark is not None for mark in outside[0])
    # the tamperer cuts the tail after seq 7, checkpoint rows included
    sql(store, "DELETE FROM audit_records WHERE seq > 7")
    sql(store, "DELETE FROM audit_labels WHERE seq > 7")
    sql(store, "DELETE FROM audit_checkpoints WHERE seq > 7")
    alone = store.verify(checker=CHECKER)
    assert alone.ok and "the 2 links after seq 5 are not yet anchored" in alone.describe()
    check = broken(store, extra_checkpoints=outside)
    assert check.problem is not None and check.problem.problem == "truncated"
    capsys.readouterr()
    args = ["audit", "verify", "--checkpoints", str(kept), "--store", store.url]
    _, public = write_key_files(tmp_path)
    assert main([*args, "--public-key", str(public)]) == 1
    assert "truncated" in capsys.readouterr().err


def test_a_rewritten_chain_is_caught_by_the_signed_checkpoints(
    store: AuditStore, tmp_path: Path
) -> None:
    fill(store)
    outside = {0: [parse_checkpoint(mark.as_json()) for mark in store.checkpoints(0)]}
    rewrite_chain(store.url, 0, 2, '"answer":"', '"answer":"Not ')
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.seq, check.problem.problem) == (5, "checkpoint_mismatch")
    # the tamperer re-points the store's checkpoints at the new heads: no signature fits
    for mark in store.checkpoints(0):
        head = sql(
            store,
            "UPDATE audit_checkpoints SET chain_hash = (SELECT chain_hash FROM audit_records "
            "WHERE seq = :s) WHERE seq = :s",
            s=mark.seq,
        )
        assert head == 1
    check = broken(store)
    assert check.problem is not None and check.problem.problem == "checkpoint_forged"
    # ... or deletes them: the published ones still hold the old heads
    sql(store, "DELETE FROM audit_checkpoints")
    assert store.verify().ok, "the chain alone verifies: it was recomputed"
    check = broken(store, extra_checkpoints=outside)
    assert check.problem is not None and check.problem.problem == "checkpoint_mismatch"


def test_a_purge_by_hand_is_caught_and_a_signed_purge_verifies(store: AuditStore) -> None:
    fill(store)
    assert store.purge_conversation("conv-1", signer=SIGNER, now=NOW) == 12
    report = store.verify(checker=CHECKER)
    assert report.ok, report.describe()
    [check] = report.partitions
    assert (check.purges, check.trusted_leaves, check.unanchored) == (1, 13, 0)
    # a purged row's columns are bound by the signed entry
    sql(store, "UPDATE audit_records SET action = 'pass' WHERE answer_id = 'ans-2'")
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.name, check.problem.problem) == ("ans-2", "column_mismatch")


def test_a_purge_made_in_sql_is_caught(store: AuditStore) -> None:
    fill(store)
    emptied = sql(
        store,
        "UPDATE audit_records SET record_json = NULL, purged_at = CURRENT_TIMESTAMP "
        "WHERE answer_id = 'ans-4'",
    )
    assert emptied == 1
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.name, check.problem.problem) == ("ans-4", "unsigned_purge")
    assert not store.verify().ok, "caught without the public key too"


def test_a_forged_purge_entry_is_caught(store: AuditStore) -> None:
    fill(store)
    append_forged_purge(store.url, 0, 6, FORGER)
    check = broken(store)
    assert check.problem is not None
    assert (check.problem.name, check.problem.problem) == ("ans-4", "unsigned_purge")
    sql(store, "UPDATE audit_records SET record_json = 'x' WHERE answer_id = 'ans-4'")
    check = broken(store)
    assert check.problem is not None and check.problem.problem == "leaf_mismatch"


def test_two_tenants_with_one_answer_id_both_keep_their_records(
    store: AuditStore, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_records(2, tenant="tenant-a")
    second = make_records(2, tenant="tenant-b")
    values = [(i, r.model_dump_json().encode()) for i, r in enumerate([*first, *second])]
    done = store.append(0, values, signer=SIGNER, now=NOW)
    assert done.stored == ["ans-0", "ans-1", "ans-0", "ans-1"] and not done.duplicates
    again = store.append(0, values, signer=SIGNER, now=NOW)
    assert again.duplicates == ["ans-0", "ans-1", "ans-0", "ans-1"], "each stored once"
    with pytest.raises(AmbiguousAnswer, match="tenant-a, tenant-b"):
        store.get("ans-0")
    b = store.get("ans-0", "tenant-b")
    assert b is not None and b.record == second[0]
    assert main(["audit", "show", "ans-0", "--plain", "--store", store.url]) == 2
    assert "--tenant" in capsys.readouterr().err
    code = main(["audit", "show", "ans-0", "--tenant", "tenant-a", "--plain", "--store", store.url])
    assert code == 0 and "tenant: tenant-a" in capsys.readouterr().out
    assert store.verify(checker=CHECKER).ok


def test_a_store_made_before_tenant_keys_is_upgraded_in_place(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    make_old_store(url)
    with AuditStore(url) as store:
        assert store.verify().ok
        assert [s.answer_id for s in store.find()] == ["ans-0"]
        done = store.append(0, [(9, make_records(1, tenant="other")[0].model_dump_json().encode())])
        assert done.stored == ["ans-0"], "the other tenant's answer with the same id is kept"
        assert store.checkpoint(0, signer=SIGNER) is not None
        report = store.verify(checker=CHECKER)
        assert report.ok and report.partitions[0].anchored_seq == 2, report.describe()
    with AuditStore(url) as store:
        assert len(store.find()) == 2, "opening it again changes nothing"


def test_an_export_after_a_purge_holds_every_link_for_an_outside_verifier(
    store: AuditStore,
) -> None:
    fill(store)
    store.purge_conversation("conv-1", signer=SIGNER, now=NOW)
    lines = [stored.as_json() for stored in store.export_entries()]
    assert [line["seq"] for line in lines] == list(range(1, 15)), "no gap where the purge is"
    [purge] = [line for line in lines if line.get("kind") == "audit_purge"]
    assert leaf_hash(canonical_json(purge["entry"])).hex() == purge["leaf_hash"]
    entry = purge["entry"]
    assert isinstance(entry, dict)
    assert CHECKER.valid(entry) and len(entry["rows"]) == 13
