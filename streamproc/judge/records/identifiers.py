"""Identifiers: "your order 4500017312" against the record's ``order_id``.

An id a record field settles is read, not inferred: NLI sees two long digit runs as
alike. A claim's id is compared only with fields of the same kind (an order number with
``order_id``, a PO with ``purchase_order_number``), up to case, separators, a kind prefix
and leading zeros; an id named anywhere else in the records (a related order) raises no
alarm. ``norm_id`` and ``same_id`` also serve token confidence
(:mod:`.confirmation`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.events import VerdictLabel
from streamproc.judge.records.common import Record, confirm
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.features import word_set

__all__ = [
    "Identifier",
    "check_ids",
    "claim_ids",
    "norm_id",
    "same_id",
]


_ID_KINDS: Final[Mapping[str, str]] = {
    "purchase order": "po", "po": "po", "order": "order", "invoice": "invoice",
    "ticket": "ticket", "case": "case", "reference": "reference", "ref": "reference",
    "tracking": "tracking", "account": "account", "customer": "customer",
    "booking": "booking", "reservation": "reservation", "transaction": "transaction",
    "shipment": "shipment", "rma": "rma", "claim": "claim", "contract": "contract",
    "subscription": "subscription",
}  # fmt: skip
_ID_PREFIXES: Final[Mapping[str, str]] = {
    "INV": "invoice", "PO": "po", "ORD": "order", "TKT": "ticket", "RMA": "rma",
    "CASE": "case", "REF": "reference",
}  # fmt: skip
_KIND_WORDS = "|".join(sorted(_ID_KINDS, key=len, reverse=True)).replace(" ", r"\s+")
_CLAIM_ID = re.compile(
    rf"\b(?P<kind>{_KIND_WORDS})\s*(?:(?:number|no\.?|num|nr|#|id|code)\s*)?"
    r"(?:(?:is|was)\s+)?(?:[:#]\s*)?"  # not "[:#]?\s*": two adjacent \s* are quadratic
    r"(?P<id>(?=[\w-]*\d)[A-Z0-9][\w-]*[A-Z0-9]|\d{3,})\b"
    rf"|\b(?P<prefixed>(?:{'|'.join(_ID_PREFIXES)})[-_]?\d[\w-]*)\b",
    re.IGNORECASE,
)
_ID_FIELD_ENDS: Final = word_set("id number no num nr ref reference code")


@dataclass(frozen=True, slots=True)
class Identifier:
    kind: str
    written: str


def claim_ids(claim: str) -> list[Identifier]:
    found = []
    for match in _CLAIM_ID.finditer(claim):
        if match["prefixed"]:
            prefix = re.match(r"[A-Za-z]+", match["prefixed"])
            kind = _ID_PREFIXES.get(prefix[0].upper(), "") if prefix else ""
            if kind:
                found.append(Identifier(kind, match["prefixed"]))
        elif len(match["id"]) >= 3 and not match["id"].isalpha():
            kind = _ID_KINDS[re.sub(r"\s+", " ", match["kind"].lower())]
            found.append(Identifier(kind, match["id"]))
    return found


def _id_kind_of_field(words: Sequence[str]) -> str | None:
    """``order_id`` -> order, ``purchase_order_number`` -> po, ``invoice`` -> invoice."""
    if not words:
        return None
    if "purchase" in words and "order" in words:
        kind = "po"
    else:
        singular = [w[:-1] if w not in _ID_KINDS and w.endswith("s") else w for w in words]
        kinds = [_ID_KINDS[w] for w in singular if w in _ID_KINDS]
        if not kinds:
            return None
        kind = kinds[-1]
    last = words[-1]
    return kind if last in _ID_FIELD_ENDS or _ID_KINDS.get(last) == kind else None


def norm_id(value: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", value.upper())


def same_id(a: str, b: str) -> bool:
    """Equal up to case, separators, a kind prefix ("PO-4500" = "4500") or leading zeros."""
    x, y = norm_id(a), norm_id(b)
    if x == y:
        return True
    bare_x, bare_y = re.sub(r"^[A-Z]+", "", x), re.sub(r"^[A-Z]+", "", y)
    return bool(bare_x) and bare_x.lstrip("0") == bare_y.lstrip("0")


def check_ids(
    ids: Sequence[Identifier], records: Sequence[Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    """(mismatch, confirmation) for the claim's identifiers."""
    confirmation = None
    for ident in ids:
        known = [
            (r, leaf)
            for r in records
            for leaf in r.leaves
            if isinstance(leaf.value, str | int)
            and not isinstance(leaf.value, bool)
            and re.search(r"\d", str(leaf.value))
            and _id_kind_of_field(r.words(leaf)) == ident.kind
        ]
        if not known:
            continue
        match = next(((r, lf) for r, lf in known if same_id(ident.written, str(lf.value))), None)
        if match is not None:
            confirmation = confirmation or confirm(match[0], match[1], ident.written)
            continue
        if any(norm_id(ident.written) in norm_id(r.item.text) for r in records):
            continue  # named somewhere in the records (a related order): no alarm
        record, leaf = known[0]
        return (
            RecordFinding(
                RecordReason.IDENTIFIER_MISMATCH,
                VerdictLabel.CONTRADICTED,
                f"claim names {ident.kind} {ident.written}, record {record.item.id} "
                f"{leaf.name} is {leaf.value}",
                evidence_id=record.item.id,
                field=leaf.name,
                claim_value=ident.written,
                record_value=str(leaf.value),
            ),
            None,
        )
    return None, confirmation
