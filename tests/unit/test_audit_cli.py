"""``streamproc audit ...`` on a SQLite store: the complaint walk without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamproc.adapters.audit_store import AuditStore
from streamproc.audit import canonical_json, leaf_hash
from streamproc.cli import main
from tests.unit.audit.audit_samples import EVIDENCE_TEXT, NOW, TRACE_ID, make_records
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
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "audit", "purge", "--conversation", "conv-2", "--no-topic", "--store", store_url
    )
    assert code == 0 and "purged 3 record(s)" in out
    code, out, _ = run(capsys, "audit", "show", "ans-5", "--plain", "--store", store_url)
    assert code == 0 and "purged_at:" in out and EVIDENCE_TEXT not in out
    code, out, _ = run(capsys, "audit", "verify", "--store", store_url)
    assert code == 0 and "3 purged" in out
    code, out, _ = run(capsys, "audit", "purge", "--expired", "--days", "1", "--store", store_url)
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
