"""The hash chain on its own: known digests, and every way a chain can be broken."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from streamproc.audit.chain import (
    GENESIS,
    ChainRow,
    ChainVerifier,
    Checkpoint,
    canonical_json,
    chain_hash,
    leaf_hash,
    link,
    verify_chain,
)


def build(contents: list[bytes]) -> list[ChainRow]:
    rows, head = [], GENESIS
    for seq, content in enumerate(contents, start=1):
        row = link(seq, head, content, f"ans-{seq}")
        rows.append(row)
        head = row.chain_hash
    return rows


CONTENTS = [canonical_json({"answer_id": f"ans-{i}", "n": i}) for i in range(1, 9)]


def test_digests_follow_rfc6962_domain_separation() -> None:
    content = b'{"a":1}'
    assert leaf_hash(content) == hashlib.sha256(b"\x00" + content).digest()
    leaf = leaf_hash(content)
    assert chain_hash(GENESIS, leaf) == hashlib.sha256(b"\x01" + bytes(32) + leaf).digest()
    assert leaf_hash(content) != hashlib.sha256(content).digest()
    with pytest.raises(ValueError, match="32-byte"):
        chain_hash(b"short", leaf)


def test_canonical_json_sorts_keys_drops_spaces_keeps_utf8() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "Köln — “x”"}) == (
        '{"a":"Köln — “x”","b":[1,2.5]}'.encode()
    )
    assert (
        canonical_json({"z": 1, "a": {"y": None, "b": True}}) == b'{"a":{"b":true,"y":null},"z":1}'
    )
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_an_intact_chain_verifies() -> None:
    assert verify_chain(build(CONTENTS)) is None
    assert verify_chain([]) is None


def test_an_altered_record_is_named_by_its_leaf() -> None:
    rows = build(CONTENTS)
    rows[3] = dataclasses.replace(rows[3], content=canonical_json({"answer_id": "ans-4", "n": 0}))
    broken = verify_chain(rows)
    assert broken is not None
    assert (broken.seq, broken.problem, broken.name) == (4, "leaf_mismatch", "ans-4")
    assert "ans-4" in broken.describe()


def test_a_deleted_record_leaves_a_gap_named_at_the_next_one() -> None:
    rows = build(CONTENTS)
    del rows[4]
    broken = verify_chain(rows)
    assert broken is not None
    assert (broken.seq, broken.problem, broken.name) == (6, "seq_gap", "ans-6")
    assert "seq 5..5 missing" in broken.detail


def test_a_deleted_record_with_renumbered_seqs_breaks_the_links() -> None:
    rows = build(CONTENTS)
    del rows[4]
    rows = [dataclasses.replace(row, seq=seq) for seq, row in enumerate(rows, start=1)]
    broken = verify_chain(rows)
    assert broken is not None
    assert (broken.seq, broken.problem, broken.name) == (5, "prev_mismatch", "ans-6")


def test_a_record_rehashed_in_place_breaks_the_next_link() -> None:
    rows = build(CONTENTS)
    forged = link(3, rows[1].chain_hash, canonical_json({"answer_id": "ans-3", "n": 99}), "ans-3")
    rows[2] = forged
    broken = verify_chain(rows)
    assert broken is not None
    assert (broken.seq, broken.problem) == (4, "prev_mismatch")


def test_a_rewritten_chain_is_caught_by_a_checkpoint() -> None:
    honest = build(CONTENTS)
    mark = Checkpoint(6, honest[5].chain_hash)
    forged = build([*CONTENTS[:2], canonical_json({"forged": True}), *CONTENTS[3:]])
    assert verify_chain(forged) is None, "a whole rewrite is self-consistent"
    broken = verify_chain(forged, checkpoints=[mark])
    assert broken is not None
    assert (broken.seq, broken.problem) == (6, "checkpoint_mismatch")


def test_a_cut_tail_is_caught_by_a_checkpoint_past_the_end() -> None:
    rows = build(CONTENTS)
    marks = [Checkpoint(4, rows[3].chain_hash), Checkpoint(8, rows[7].chain_hash)]
    assert verify_chain(rows, checkpoints=marks) is None
    broken = verify_chain(rows[:5], checkpoints=marks)
    assert broken is not None
    assert (broken.seq, broken.problem) == (8, "truncated")
    assert "ends at seq 5" in broken.detail
    assert verify_chain(rows[:5], checkpoints=marks, to_end=False) is None, "a range may stop"


def test_a_purged_record_is_trusted_by_its_stored_leaf_and_counted() -> None:
    rows = build(CONTENTS)
    rows[2] = dataclasses.replace(rows[2], content=None)
    verifier = ChainVerifier()
    for row in rows:
        assert verifier.feed(row) is None
    assert verifier.finish() is None
    assert (verifier.checked, verifier.trusted_leaves) == (8, 1)
    # but its leaf hash still may not change: the chain hash covers it
    rows[2] = dataclasses.replace(rows[2], leaf_hash=leaf_hash(b"other"))
    broken = verify_chain(rows)
    assert broken is not None and (broken.seq, broken.problem) == (3, "chain_mismatch")


def test_a_malformed_hash_is_a_break_not_a_crash() -> None:
    rows = build(CONTENTS)
    rows[1] = dataclasses.replace(rows[1], content=None, leaf_hash=b"")
    broken = verify_chain(rows)
    assert broken is not None and (broken.seq, broken.problem) == (2, "chain_mismatch")


def test_verification_can_start_mid_chain() -> None:
    rows = build(CONTENTS)
    assert verify_chain(rows[3:], prev_hash=rows[2].chain_hash, first_seq=4) is None
    broken = verify_chain(rows[3:], prev_hash=GENESIS, first_seq=4)
    assert broken is not None and broken.problem == "prev_mismatch"
