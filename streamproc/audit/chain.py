"""The tamper-evident hash chain of the audit trail, as plain functions (no I/O).

Each stored audit record is a *leaf*, and so is each reviewer's label entry (who
agreed or disagreed with the judge); the records and labels of one audit-topic
partition, in offset order, form one chain. The hashes follow RFC 6962 (Certificate
Transparency) in using a one-byte domain prefix, so a leaf can never be confused with a
chain link:

- ``leaf_hash  = sha256(0x00 || canonical_json(record))``
- ``chain_hash = sha256(0x01 || prev_chain_hash || leaf_hash)``, the first ``prev`` being
  :data:`GENESIS` (32 zero bytes).

Changing a stored record changes its leaf hash; deleting a row leaves a gap in the
sequence numbers and a ``prev`` that no longer matches; removing the tail is caught by a
checkpoint (a chain head published elsewhere) that points past the end.

**Canonical JSON.** Keys sorted, no insignificant whitespace (``,`` and ``:``), UTF-8
without ``\\u`` escapes for non-ASCII text, NaN and Infinity refused. This is Python's
``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``; it is not RFC
8785 (JCS) in its number formatting, and it need not be: the store keeps the canonical
bytes themselves, so a verifier in any language hashes the stored text as it is and never
has to re-serialise a record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

__all__ = [
    "GENESIS",
    "ChainBreak",
    "ChainRow",
    "ChainVerifier",
    "Checkpoint",
    "Problem",
    "canonical_json",
    "chain_hash",
    "leaf_hash",
    "link",
    "verify_chain",
]

GENESIS: Final = bytes(32)
"""The ``prev`` of the first record of every chain."""

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"

Problem = Literal[
    "seq_gap",
    "prev_mismatch",
    "leaf_mismatch",
    "chain_mismatch",
    "checkpoint_mismatch",
    "truncated",
    "column_mismatch",
    "unsigned_purge",
    "purge_forged",
    "checkpoint_forged",
]


def canonical_json(document: object) -> bytes:
    """The one byte string a JSON document hashes as (see the module docstring)."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def leaf_hash(canonical: bytes) -> bytes:
    """sha256 of a record's canonical bytes, domain-separated from chain links."""
    return hashlib.sha256(_LEAF_PREFIX + canonical).digest()


def chain_hash(prev: bytes, leaf: bytes) -> bytes:
    """The chain head after appending ``leaf`` to a chain whose head was ``prev``."""
    if len(prev) != 32 or len(leaf) != 32:
        raise ValueError("chain hashes are 32-byte sha256 digests")
    return hashlib.sha256(_NODE_PREFIX + prev + leaf).digest()


@dataclass(frozen=True, slots=True)
class ChainRow:
    """One stored link. ``content`` is the canonical record, or None once purged: the
    stored ``leaf_hash`` is then trusted (and counted as such), the links still checked."""

    seq: int
    leaf_hash: bytes
    prev_hash: bytes
    chain_hash: bytes
    content: bytes | None
    name: str = ""
    """What a person calls this record (the answer id), for reports."""
    label_id: str | None = None
    """Set when the link is a reviewer's label of answer ``name``, not its record."""
    fault: tuple[Problem, str] | None = None
    """What the store found wrong with the row beyond its hashes (an indexed column
    that differs from the hashed document, a purge no signed entry accounts for);
    reported once the row's hashes check out."""


def link(
    seq: int, prev: bytes, content: bytes, name: str = "", label_id: str | None = None
) -> ChainRow:
    """The row that appends ``content`` after a chain whose head is ``prev``."""
    leaf = leaf_hash(content)
    return ChainRow(seq, leaf, prev, chain_hash(prev, leaf), content, name, label_id)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A chain head recorded at ``seq``: the chain must reach it, with this hash."""

    seq: int
    chain_hash: bytes


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first record at which a chain stops verifying, and why."""

    seq: int
    problem: Problem
    detail: str
    name: str | None = None
    """The answer id of the offending row; None when the row is missing."""
    label_id: str | None = None
    """Set when the offending row is a reviewer's label (of answer ``name``)."""

    def describe(self) -> str:
        who = f" (answer {self.name})" if self.name else ""
        if self.label_id is not None:
            who = f" (label {self.label_id} of answer {self.name})"
        return f"seq {self.seq}{who}: {self.problem}: {self.detail}"


@dataclass(slots=True)
class ChainVerifier:
    """Checks rows one at a time, so a chain of millions streams through in constant
    memory. Feed rows in ``seq`` order, then call :meth:`finish`."""

    prev_hash: bytes = GENESIS
    next_seq: int = 1
    checkpoints: Sequence[Checkpoint] = ()
    checked: int = 0
    trusted_leaves: int = 0
    """Purged rows whose stored leaf hash was taken on trust."""
    broken: ChainBreak | None = None
    _wanted: dict[int, set[bytes]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for mark in self.checkpoints:
            if mark.seq >= self.next_seq:
                self._wanted.setdefault(mark.seq, set()).add(mark.chain_hash)

    def feed(self, row: ChainRow) -> ChainBreak | None:
        """Check one row; the first break is kept and returned again on every later call."""
        if self.broken is None:
            self.broken = self._check(row)
        return self.broken

    def finish(self, *, to_end: bool = True) -> ChainBreak | None:
        """The first break, or a checkpoint the chain never reached (the tail was cut).
        ``to_end=False``: a range that stops early, so unreached checkpoints are fine."""
        if self.broken is None and to_end and self._wanted:
            seq = min(self._wanted)
            last = self.next_seq - 1
            self.broken = ChainBreak(
                seq,
                "truncated",
                f"a checkpoint records the chain at seq {seq}, but it ends at seq {last}: "
                f"{seq - last} or more records are missing from the tail",
            )
        return self.broken

    def _check(self, row: ChainRow) -> ChainBreak | None:
        found = self._find_break(row)
        if found is not None and row.label_id is not None:
            return replace(found, label_id=row.label_id)
        return found

    def _find_break(self, row: ChainRow) -> ChainBreak | None:
        name = row.name or None
        if row.seq != self.next_seq:
            missing = (
                f"seq {self.next_seq}..{row.seq - 1} missing"
                if row.seq > self.next_seq
                else f"seq {row.seq} repeated or out of order"
            )
            return ChainBreak(row.seq, "seq_gap", f"{missing} before this record", name)
        if row.prev_hash != self.prev_hash:
            return ChainBreak(
                row.seq,
                "prev_mismatch",
                f"prev hash {row.prev_hash.hex()} is not the previous head {self.prev_hash.hex()}",
                name,
            )
        if len(row.leaf_hash) != 32 or len(row.chain_hash) != 32:
            return ChainBreak(row.seq, "chain_mismatch", "a stored hash is not sha256", name)
        if row.content is None:
            self.trusted_leaves += 1
        else:
            actual = leaf_hash(row.content)
            if actual != row.leaf_hash:
                return ChainBreak(
                    row.seq,
                    "leaf_mismatch",
                    f"the stored record hashes to {actual.hex()}, not its leaf hash "
                    f"{row.leaf_hash.hex()}: it was altered after it was stored",
                    name,
                )
        expected = chain_hash(self.prev_hash, row.leaf_hash)
        if expected != row.chain_hash:
            return ChainBreak(
                row.seq,
                "chain_mismatch",
                f"chain hash {row.chain_hash.hex()} should be {expected.hex()}",
                name,
            )
        if row.fault is not None:
            return ChainBreak(row.seq, row.fault[0], row.fault[1], name)
        wrong = self._wanted.pop(row.seq, set()) - {row.chain_hash}
        if wrong:
            return ChainBreak(
                row.seq,
                "checkpoint_mismatch",
                f"a checkpoint recorded the head here as {min(wrong).hex()}, the chain has "
                f"{row.chain_hash.hex()}: the chain was rewritten",
                name,
            )
        self.prev_hash = row.chain_hash
        self.next_seq += 1
        self.checked += 1
        return None


def verify_chain(
    rows: Iterable[ChainRow],
    *,
    prev_hash: bytes = GENESIS,
    first_seq: int = 1,
    checkpoints: Sequence[Checkpoint] = (),
    to_end: bool = True,
) -> ChainBreak | None:
    """The first bad row of a chain (rows in ``seq`` order), or None when it verifies.

    ``prev_hash`` / ``first_seq`` start the check mid-chain (the head before
    ``first_seq``). ``checkpoints`` must each be reached with the recorded hash."""
    verifier = ChainVerifier(prev_hash, first_seq, checkpoints)
    for row in rows:
        if verifier.feed(row) is not None:
            break
    return verifier.finish(to_end=to_end)
