"""Verifying the audit store: each chain walked by seq, every indexed column
checked against its hashed document, checkpoints and purge entries weighed."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Row,
    Table,
    select,
)

from streamproc.audit.anchors import (
    TopicCheckpoint,
    purged_rows,
)
from streamproc.audit.chain import (
    GENESIS,
    ChainBreak,
    ChainRow,
    ChainVerifier,
    Checkpoint,
    Problem,
)
from streamproc.audit.columns import (
    LABEL_COLUMNS,
    RECORD_COLUMNS,
    columns_digest,
    comparable,
    label_columns,
    record_columns,
)
from streamproc.audit.signing import SignatureChecker
from streamproc.audit.store._read import _ReadingStore
from streamproc.audit.store._results import (
    StoredCheckpoint,
    _unhex,
)
from streamproc.audit.store._schema import (
    _labels,
    _purges,
    _records,
)


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    """The verification of one partition's chain."""

    partition: int
    checked: int
    """Links that verified: records and labels."""
    trusted_leaves: int
    last_seq: int
    checkpoints: int
    problem: ChainBreak | None
    labels: int = 0
    """How many of ``checked`` are reviewers' labels."""
    purges: int = 0
    """How many of ``checked`` are signed purge entries."""
    anchored_seq: int = 0
    """The highest seq a signed checkpoint vouches for (0: none); 0 too when no public
    key was given, since then no signature was checked."""
    signed_checkpoints: int = 0

    @property
    def records(self) -> int:
        return self.checked - self.labels - self.purges

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def unanchored(self) -> int:
        """Links after the last signed checkpoint: they verify, but nothing outside the
        store vouches for them yet (a cut there would go unseen)."""
        return max(0, self.last_seq - self.anchored_seq)

    def describe(self) -> str:
        head = (
            f"partition {self.partition}: {self.records} records and {self.labels} labels "
            f"checked through seq {self.last_seq}, {self.purges} purge entries, "
            f"{self.checkpoints} checkpoints ({self.signed_checkpoints} signed and valid), "
            f"{self.trusted_leaves} purged (leaf hash trusted)"
        )
        if self.problem is not None:
            return f"{head}; BROKEN at {self.problem.describe()}"
        if self.anchored_seq:
            head += f"; anchored by a signed checkpoint through seq {self.anchored_seq}"
        if self.unanchored:
            head += (
                f"; NOT PROVEN: the {self.unanchored} links after "
                + (f"seq {self.anchored_seq}" if self.anchored_seq else "the chain's start")
                + " are not yet anchored by a signed checkpoint"
            )
        return head


@dataclass(frozen=True, slots=True)
class VerifyReport:
    partitions: tuple[PartitionCheck, ...]
    signatures_checked: bool = True
    """False when no public key was given: checkpoints, purge entries and the tail
    stand unproven."""

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.partitions)

    @property
    def not_proven(self) -> list[str]:
        """What this verification could not prove, in words."""
        found: list[str] = []
        if not self.signatures_checked:
            found.append(
                "no public key given: no checkpoint or purge signature was checked, so a "
                "rewritten chain, a cut tail or a forged purge entry would go unseen"
            )
        for check in self.partitions:
            if check.ok and check.unanchored:
                found.append(
                    f"partition {check.partition}: the {check.unanchored} links after "
                    + (f"seq {check.anchored_seq}" if check.anchored_seq else "the start")
                    + " are not yet anchored"
                )
        return found

    @property
    def first_problem(self) -> PartitionCheck | None:
        """The first broken partition (lowest number), whose ``problem`` names the record."""
        return next((check for check in self.partitions if not check.ok), None)

    def describe(self) -> str:
        if not self.partitions:
            return "no audit records to verify"
        return "\n".join(check.describe() for check in self.partitions)


class _VerifyingStore(_ReadingStore):
    """The audit store's verification of its chains."""

    def verify(
        self,
        partition: int | None = None,
        since_seq: int | None = None,
        until_seq: int | None = None,
        *,
        extra_checkpoints: Mapping[int, Sequence[Checkpoint | TopicCheckpoint]] | None = None,
        checker: SignatureChecker | None = None,
    ) -> VerifyReport:
        """Check the chains (one partition or all) from ``since_seq`` to ``until_seq``
        (inclusive; default: the whole chain). Each check names the first bad link: an
        altered record (leaf mismatch), an indexed column that differs from its hashed
        document, a deleted link (seq gap), a rewritten chain (a checkpoint whose head it
        no longer reaches), a cut tail (a checkpoint past the end), a row emptied by no
        signed purge entry, a forged purge entry or checkpoint. ``extra_checkpoints``:
        chain heads from outside the store (the checkpoint topic, a file). ``checker``:
        the public key; without it no signature is checked and the report says so."""
        extra = extra_checkpoints or {}
        if partition is not None:
            chosen = [partition]
        else:
            chosen = sorted(set(self.partitions()) | set(extra))
        return VerifyReport(
            tuple(
                self._verify_partition(p, since_seq, until_seq, list(extra.get(p, ())), checker)
                for p in chosen
            ),
            signatures_checked=checker is not None,
        )

    def _verify_partition(
        self,
        partition: int,
        since_seq: int | None,
        until_seq: int | None,
        extra: list[Checkpoint | TopicCheckpoint],
        checker: SignatureChecker | None,
    ) -> PartitionCheck:
        first = max(1, since_seq or 1)
        marks, signed, forged = _weigh_checkpoints(self.checkpoints(partition), extra, checker)
        if until_seq is not None:
            marks = [mark for mark in marks if mark.seq <= until_seq]
        if forged is not None:
            return PartitionCheck(partition, 0, 0, 0, len(marks), forged)
        purges = self._purge_entries(partition, checker)
        prev = GENESIS
        if first > 1:
            with self._begin() as conn:
                anchor = None
                for table in (_records, _labels, _purges):
                    anchor = (
                        anchor
                        or conn.execute(
                            select(table.c.chain_hash).where(
                                table.c.audit_partition == partition, table.c.seq == first - 1
                            )
                        ).scalar()
                    )
            if anchor is None:
                missing = ChainBreak(
                    first - 1, "seq_gap", "the record before the range is missing", None
                )
                return PartitionCheck(partition, 0, 0, first - 1, len(marks), missing)
            prev = _unhex(anchor)
        verifier = ChainVerifier(prev, first, marks)
        labels = purge_links = 0
        for row in self._chain_rows(partition, first, until_seq, purges):
            if verifier.feed(row) is not None:
                break
            labels += row.label_id is not None
            purge_links += row.seq in purges.links
        problem = verifier.finish(to_end=until_seq is None)
        last = verifier.next_seq - 1
        reached = [mark.seq for mark in signed if mark.seq <= last]
        return PartitionCheck(
            partition,
            verifier.checked,
            verifier.trusted_leaves,
            last,
            len(marks),
            problem,
            labels,
            purge_links,
            anchored_seq=max(reached, default=0) if problem is None else 0,
            signed_checkpoints=len(signed),
        )

    def _purge_entries(self, partition: int, checker: SignatureChecker | None) -> _Purges:
        """The partition's purge entries: which rows each signed one emptied, and the
        entries whose signature fails."""
        found = _Purges()
        with self._begin() as conn:
            rows = conn.execute(
                select(_purges.c.seq, _purges.c.entry_json).where(
                    _purges.c.audit_partition == partition
                )
            ).all()
        for row in rows:
            seq = int(row.seq)
            found.links.add(seq)
            try:
                document = json.loads(row.entry_json)
            except ValueError:
                found.forged[seq] = "the purge entry is not JSON"
                continue
            if not isinstance(document, dict) or document.get("partition") != partition:
                found.forged[seq] = "the purge entry names another partition"
            elif checker is not None and not checker.valid(document):
                found.forged[seq] = "the purge entry's signature does not verify: it was forged"
            else:
                found.emptied.update(purged_rows(document))
        return found

    def _chain_rows(
        self, partition: int, first: int, until: int | None, purges: _Purges
    ) -> Iterator[ChainRow]:
        """The partition's links, records, labels and purge entries merged by seq."""
        return heapq.merge(
            self._table_rows(_records, partition, first, until, purges),
            self._table_rows(_labels, partition, first, until, purges),
            self._table_rows(_purges, partition, first, until, purges),
            key=lambda row: row.seq,
        )

    def _table_rows(
        self, table: Table, partition: int, first: int, until: int | None, purges: _Purges
    ) -> Iterator[ChainRow]:
        if table is _purges:
            columns: tuple[Any, ...] = (
                table.c.purge_id.label("name"),
                table.c.entry_json.label("content"),
            )
        elif table is _labels:
            columns = (
                table.c.answer_id.label("name"),
                table.c.entry_json.label("content"),
                *(table.c[name] for name in LABEL_COLUMNS if name != "answer_id"),
            )
        else:
            columns = (
                table.c.answer_id.label("name"),
                table.c.record_json.label("content"),
                *(table.c[name] for name in RECORD_COLUMNS if name != "answer_id"),
            )
        columns = (
            table.c.audit_partition,
            table.c.seq,
            *columns,
            table.c.leaf_hash,
            table.c.prev_hash,
            table.c.chain_hash,
        )
        where = [table.c.audit_partition == partition, table.c.seq >= first]
        if until is not None:
            where.append(table.c.seq <= until)

        def chain_row(row: Row[Any]) -> ChainRow:
            if table is _purges:
                name, label_id = f"purge {row.name}", None
                fault = purges.fault(int(row.seq))
            elif table is _labels:
                name, label_id = row.name, row.label_id
                fault = _column_fault(row, label_columns, LABEL_COLUMNS, "entry", purges)
            else:
                name, label_id = row.name, None
                fault = _column_fault(row, record_columns, RECORD_COLUMNS, "record", purges)
            return ChainRow(
                seq=int(row.seq),
                leaf_hash=_unhex(row.leaf_hash),
                prev_hash=_unhex(row.prev_hash),
                chain_hash=_unhex(row.chain_hash),
                content=None if row.content is None else row.content.encode("utf-8"),
                name=name,
                label_id=label_id,
                fault=fault,
            )

        yield from self._in_chain_order(table, columns, where, chain_row)


@dataclass(slots=True)
class _Purges:
    """A partition's purge entries, read before its chain is walked."""

    links: set[int] = field(default_factory=set)
    """The seqs of purge entries."""
    emptied: dict[int, str] = field(default_factory=dict)
    """seq -> columns digest of each row a valid purge entry emptied."""
    forged: dict[int, str] = field(default_factory=dict)
    """seq of a purge entry -> why it is not one."""

    def fault(self, seq: int) -> tuple[Problem, str] | None:
        why = self.forged.get(seq)
        return None if why is None else ("purge_forged", why)


def _column_fault(
    row: Row[Any],
    columns: Callable[[Any], dict[str, Any]],
    names: Sequence[str],
    noun: str,
    purges: _Purges,
) -> tuple[Problem, str] | None:
    """What is wrong with a row's indexed columns: one that differs from its hashed
    document, or, once emptied, a purge no signed entry accounts for."""
    stored = comparable(
        {name: getattr(row, "name" if name == "answer_id" else name) for name in names}
    )
    if row.content is None:
        vouched = purges.emptied.get(int(row.seq))
        if vouched is None:
            return ("unsigned_purge", f"the {noun} was emptied, but no signed purge entry names it")
        if vouched != columns_digest(stored, row.leaf_hash):
            return (
                "column_mismatch",
                f"the purged {noun}'s columns differ from those its purge entry signed",
            )
        return None
    try:
        expected = comparable(columns(json.loads(row.content)))
    except (KeyError, TypeError, ValueError):
        return ("column_mismatch", f"the hashed {noun} has no readable columns")
    for name in names:
        if stored[name] != expected[name]:
            return (
                "column_mismatch",
                f"column {name} reads {stored[name]!r}, the hashed {noun} says "
                f"{expected[name]!r}: it was altered after it was stored",
            )
    return None


def _weigh_checkpoints(
    stored: Sequence[StoredCheckpoint],
    extra: Sequence[Checkpoint | TopicCheckpoint],
    checker: SignatureChecker | None,
) -> tuple[list[Checkpoint], list[Checkpoint], ChainBreak | None]:
    """Every checkpoint the chain must reach, those of them signed with a valid
    signature (the anchors), and the first whose signature fails."""
    marks: list[Checkpoint] = []
    signed: list[Checkpoint] = []
    forged: ChainBreak | None = None
    documents = [(c.mark, c.as_json(), "the store's") for c in stored] + [
        (c, None, "") if isinstance(c, Checkpoint) else (c.mark, c.document, "a published")
        for c in extra
    ]
    for mark, document, whose in documents:
        if mark not in marks:  # the store's and the topic's copies of one checkpoint
            marks.append(mark)
        if checker is None or document is None or "signature" not in document:
            continue
        if checker.valid(document):
            if mark not in signed:
                signed.append(mark)
        elif forged is None:
            forged = ChainBreak(
                mark.seq,
                "checkpoint_forged",
                f"{whose} checkpoint at seq {mark.seq} does not carry a valid signature",
            )
    return marks, signed, forged
