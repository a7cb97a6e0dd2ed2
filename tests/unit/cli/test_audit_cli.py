"""``streamproc audit ...`` on a SQLite store: the complaint walk without a broker."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from streamproc.audit import canonical_json, leaf_hash
from streamproc.audit.store import AuditStore
from streamproc.cli.main import main
from streamproc.contracts.label_events import ClaimLabelValue
from tests.unit.audit.audit_samples import EVIDENCE_TEXT, NOW, TRACE_ID, make_records
from tests.unit.audit.keys import write_key_files
from tests.unit.audit.label_samples import NOTE, label_bytes, make_label
from tests.unit.audit.store_contract import sql


@pytest.fixture()
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore(url) as store:
        store.append(0, list(enumerate(make_records(4))), checkpoint_every=2, now=NOW)
        store.append(1, list(enumerate(make_records(3, start=4, conversation="conv-2"))), now=NOW)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_plain_prints_the_exact_evidence_claims_verdicts_and_trace(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--plain", "--store", store_url)
    assert code == 0
    lines = out.splitlines()
    assert f"trace_id: {TRACE_ID}" in lines
    assert f"  evidence D1: {EVIDENCE_TEXT}" in lines
    assert "action: withhold" in lines
    assert any(line.startswith("claim 1 [0:34] contradicted") for line in lines)
    assert any(line.startswith("  reason: NUMBER_MISMATCH") for line in lines)
    assert "answer: Order 7 was shipped on 3 May [D1]." in lines


def test_show_rich_and_json(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--store", store_url)
    assert code == 0
    assert "contradicted" in out and EVIDENCE_TEXT in out and TRACE_ID in out
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--json", "--store", store_url)
    document = json.loads(out)
    assert document["record"]["trace_id"] == TRACE_ID
    assert leaf_hash(canonical_json(document["record"])).hex() == document["leaf_hash"]


def test_show_of_an_unknown_answer_fails(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "audit", "show", "nope", "--store", store_url)
    assert code == 1 and "nope" in err


def test_find_and_export(
    store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "audit", "find", "--json", "--hallucinated", "--store", store_url)
    assert code == 0
    assert sorted(json.loads(line)["answer_id"] for line in out.splitlines()) == ["ans-2", "ans-5"]
    code, out, _ = run(capsys, "audit", "find", "--conversation", "conv-2", "--store", store_url)
    assert code == 0 and "ans-6" in out and "ans-0" not in out
    target = tmp_path / "export.jsonl"
    code, _, err = run(capsys, "audit", "export", "-o", str(target), "--store", store_url)
    assert code == 0 and "exported 7" in err
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [(line["partition"], line["seq"]) for line in lines][:2] == [(0, 1), (0, 2)]


def test_verify_names_the_first_bad_record(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", "verify", "--store", store_url)
    assert code == 0 and "OK" in out
    with AuditStore(store_url) as store:
        sql(
            store,
            "UPDATE audit_records SET record_json = record_json || ' ' WHERE answer_id = 'ans-5'",
        )
    code, out, err = run(capsys, "audit", "verify", "--store", store_url)
    assert code == 1
    assert "answer ans-5" in err and "partition 1, seq 2" in err and "leaf_mismatch" in err
    code, out, _ = run(capsys, "audit", "verify", "--json", "--store", store_url)
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert [p["problem"]["answer_id"] for p in report["partitions"] if p["problem"]] == ["ans-5"]


def test_purge_keeps_the_chain_verifiable(
    store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key, public = write_key_files(tmp_path)
    code, _, err = run(capsys, "audit", "purge", "--expired", "--store", store_url)
    assert code == 2 and "STREAMPROC_AUDIT__SIGNING_KEY_FILE" in err, "no key, no purge"
    signed = ("--signing-key", str(key), "--store", store_url)
    code, out, _ = run(capsys, "audit", "purge", "--conversation", "conv-2", "--no-topic", *signed)
    assert code == 0 and "purged 3 record(s)" in out
    code, out, _ = run(capsys, "audit", "show", "ans-5", "--plain", "--store", store_url)
    assert code == 0 and "purged_at:" in out and EVIDENCE_TEXT not in out
    code, out, _ = run(capsys, "audit", "verify", "--public-key", str(public), "--store", store_url)
    assert code == 0 and "3 purged" in out and "1 purge entries" in out
    code, out, _ = run(capsys, "audit", "purge", "--expired", "--days", "1", *signed)
    assert code == 0 and "purged 4 record(s)" in out, "the samples are from March 2026"


def test_show_prints_data_that_looks_like_markup_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'markup.db'}"
    [record] = make_records(1)
    odd = record.model_copy(update={"answer_id": "[/]ans[bold red]", "conversation_id": "[x]"})
    with AuditStore(url) as store:
        store.append(0, [(0, odd)])
    code, out, _ = run(capsys, "audit", "show", "[/]ans[bold red]", "--store", url)
    assert code == 0 and "[/]ans[bold red]" in out and "[x]" in out
    code, out, _ = run(capsys, "audit", "find", "--store", url)
    assert code == 0 and "[x]" in out


def test_show_prints_a_deciding_records_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'fields.db'}"
    record = make_records(3)[2]
    item = record.evidence[0].model_copy(update={"fields": {"status": "shipped", "day": 5}})
    with AuditStore(url) as store:
        store.append(0, [(0, record.model_copy(update={"evidence": [item]}))])
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--plain", "--store", url)
    assert code == 0
    assert '  evidence D1 fields: {"day": 5, "status": "shipped"}' in out.splitlines()
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--store", url)
    assert code == 0 and '"status": "shipped"' in out


@pytest.fixture()
def labelled_url(tmp_path: Path) -> str:
    """ans-0..2 on partition 0; two reviewers' labels of ans-2 on partition 1 (their keys
    differ from the answer's, so they land on any partition), after ans-3."""
    url = f"sqlite:///{tmp_path / 'labelled.db'}"
    records = make_records(4)
    alice = make_label(records[2], "L-alice", claims={0: ClaimLabelValue.SUPPORTED})
    bob = make_label(
        records[2], "L-bob", reviewer="bob", answer_label="hallucinated", note=None, hours_later=3
    )
    with AuditStore(url) as store:
        store.append(0, list(enumerate(records[:3])), now=NOW)
        store.append(1, [(0, records[3]), (1, bob), (2, label_bytes(alice))], now=NOW)
    return url


def test_show_plain_ends_with_the_reviewer_labels(
    labelled_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--plain", "--store", labelled_url)
    assert code == 0
    lines = out.splitlines()
    section = lines[lines.index("reviewer labels: 2") :]
    with AuditStore(labelled_url) as store:
        leaves = {label.label_id: label.leaf_hash for label in store.labels_for("ans-2")}
    assert section == [
        "reviewer labels: 2",
        "label L-alice by alice at 2026-03-02T13:00:00+00:00: faithful, disagrees with the judge",
        "  claim 1: judge contradicted -> reviewer supported",
        f"  note: {NOTE}",
        "  source: review-page",
        f"  chain: partition 1 seq 3 offset 2 leaf_hash {leaves['L-alice']}",
        "label L-bob by bob at 2026-03-02T15:00:00+00:00: hallucinated, agrees with the judge",
        "  note: -",
        "  source: review-page",
        f"  chain: partition 1 seq 2 offset 1 leaf_hash {leaves['L-bob']}",
    ]
    assert lines.index("reviewer labels: 2") > next(
        i for i, line in enumerate(lines) if line.startswith("claim 1 ")
    ), "after the claims"
    code, out, _ = run(capsys, "audit", "show", "ans-1", "--plain", "--store", labelled_url)
    assert code == 0 and out.splitlines()[-1] == "reviewer labels: none"


def test_show_rich_and_json_carry_the_labels(
    labelled_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--store", labelled_url)
    assert code == 0
    assert "reviewer labels (2)" in out
    assert "label L-alice by alice" in out and "label L-bob by bob" in out
    assert "disagrees with the judge" in out and "agrees with the judge" in out
    assert "claim 1: judge contradicted -> reviewer supported" in out
    assert "The depot note says 5 May" in out
    assert out.index("reviewer labels") > out.index("claims")
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--json", "--store", labelled_url)
    document = json.loads(out)
    labels = document["labels"]
    assert [(x["label_id"], x["reviewer"], x["agrees_with_judge"]) for x in labels] == [
        ("L-alice", "alice", False),
        ("L-bob", "bob", True),
    ]
    assert labels[0]["entry"]["label"]["note"] == NOTE
    assert labels[0]["entry"]["claims_disagreeing"] == [0]
    for label in labels:
        assert leaf_hash(canonical_json(label["entry"])).hex() == label["leaf_hash"]


def test_verify_and_export_count_labels_and_name_an_altered_one(
    labelled_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "audit", "verify", "--json", "--store", labelled_url)
    report = json.loads(out)
    assert code == 0 and report["ok"]
    assert [(p["partition"], p["records"], p["labels"]) for p in report["partitions"]] == [
        (0, 3, 0),
        (1, 1, 2),
    ]
    target = tmp_path / "export.jsonl"
    code, _, err = run(capsys, "audit", "export", "-o", str(target), "--store", labelled_url)
    assert code == 0 and "exported 4 record(s) and 2 label(s)" in err
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [(x["partition"], x["seq"], x.get("label_id")) for x in lines] == [
        (0, 1, None),
        (0, 2, None),
        (0, 3, None),
        (1, 1, None),
        (1, 2, "L-bob"),
        (1, 3, "L-alice"),
    ]
    with AuditStore(labelled_url) as store:
        sql(
            store,
            "UPDATE audit_labels SET entry_json = replace(entry_json, 'bob', 'eve') "
            "WHERE label_id = 'L-bob'",
        )
    code, out, err = run(capsys, "audit", "verify", "--store", labelled_url)
    assert code == 1
    assert "partition 1, seq 2, answer ans-2, label L-bob: leaf_mismatch" in err
    assert "label L-bob of answer ans-2" in out


def test_purge_removes_the_label_notes_and_keeps_who_said_what(
    labelled_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key, _ = write_key_files(tmp_path)
    code, out, _ = run(
        capsys,
        "audit",
        "purge",
        "--conversation",
        "conv-1",
        "--no-topic",
        "--signing-key",
        str(key),
        "--store",
        labelled_url,
    )
    assert code == 0 and "purged 4 record(s)" in out
    code, out, _ = run(capsys, "audit", "show", "ans-2", "--plain", "--store", labelled_url)
    assert code == 0 and NOTE not in out
    lines = out.splitlines()
    assert (
        "label L-alice by alice at 2026-03-02T13:00:00+00:00: faithful, "
        "disagrees with the judge" in lines
    )
    assert sum(line.startswith("  purged_at: ") for line in lines) == 2
    code, out, _ = run(capsys, "audit", "verify", "--store", labelled_url)
    assert code == 0 and "1 records and 2 labels" in out and "3 purged" in out


READ_COMMANDS = [
    ["show", "ans-0"],
    ["show", "ans-0", "--json"],
    ["find"],
    ["export"],
    ["export", "-o", "out.jsonl"],
    ["verify"],
    ["checkpoints"],
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: " ".join(c))
def test_a_read_command_where_no_store_is_names_the_url_and_creates_nothing(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STREAMPROC_AUDIT__STORE_URL", raising=False)
    code, out, err = run(capsys, "audit", *command)
    assert code == 3 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"audit {command[0]}: no audit store at sqlite:///streamproc-audit.db")
    assert list(tmp_path.iterdir()) == [], "no streamproc-audit.db, no export file"


def test_a_read_command_leaves_a_database_without_the_store_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE unrelated (x INTEGER)")
    url = f"sqlite:///{other}"
    code, _, err = run(capsys, "audit", "find", "--store", url)
    assert code == 3 and "none of the store's tables" in err and url in err
    with closing(sqlite3.connect(other)) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    assert tables == [("unrelated",)]


def test_an_unreachable_postgresql_is_one_line_with_the_password_hidden(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 1 on the loopback: a real connection attempt, refused at once.
    monkeypatch.setenv("STREAMPROC_AUDIT__STORE_URL", "postgresql://u:s3cret@127.0.0.1:1/x")
    for command in (["show", "ans-0"], ["find"], ["verify"]):
        code, out, err = run(capsys, "audit", *command)
        assert code == 3 and out == ""
        assert err.count("\n") == 1, err
        assert "postgresql://u:***@127.0.0.1:1/x" in err and "s3cret" not in err
        assert "Traceback" not in err and "refused" in err.lower()


def test_a_read_command_names_the_store_it_read(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["show", "ans-0", "--plain"], ["find"], ["verify"], ["checkpoints"]):
        code, _, err = run(capsys, "audit", *command, "--store", store_url)
        assert code == 0 and f"audit store: {store_url}\n" in err
