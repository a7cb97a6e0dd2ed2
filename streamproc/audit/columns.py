"""The searchable columns of a stored record or label, derived from its hashed JSON.

The store indexes a few fields of each record (tenant, conversation, action, ...) so
``audit find`` can filter; those columns are copies, not evidence. :func:`record_columns`
and :func:`label_columns` say what each copy must hold, so the store fills them from the
document and ``audit verify`` checks every column against the document it came from.
Once a row is purged its document is gone; :func:`columns_digest` then binds the columns
into the signed purge entry instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from streamproc.audit.chain import canonical_json

__all__ = [
    "LABEL_COLUMNS",
    "RECORD_COLUMNS",
    "columns_digest",
    "comparable",
    "label_columns",
    "record_columns",
]

RECORD_COLUMNS = (
    "answer_id",
    "conversation_id",
    "tenant",
    "assistant_id",
    "model",
    "action",
    "hallucinated",
    "occurred_at",
)
LABEL_COLUMNS = (
    "label_id",
    "answer_id",
    "tenant",
    "reviewer",
    "answer_label",
    "agrees_with_judge",
    "labelled_at",
)


def record_columns(document: Mapping[str, Any]) -> dict[str, Any]:
    """The indexed columns of an audit record document (raises KeyError/TypeError/
    ValueError on a document that is no record)."""
    judgement = document["judgement"]
    return {
        "answer_id": str(document["answer_id"]),
        "conversation_id": str(document["conversation_id"]),
        "tenant": str(document["tenant"]),
        "assistant_id": str(document["assistant_id"]),
        "model": str(document["model"]),
        "action": str(judgement["action"]),
        "hallucinated": bool(judgement["hallucinated"]),
        "occurred_at": _utc(document["occurred_at"]),
    }


def label_columns(document: Mapping[str, Any]) -> dict[str, Any]:
    """The indexed columns of a label entry document."""
    label = document["label"]
    agrees = document.get("agrees_with_judge")
    return {
        "label_id": str(label["label_id"]),
        "answer_id": str(document["answer_id"]),
        "tenant": str(document["tenant"]),
        "reviewer": str(label["reviewer"]),
        "answer_label": label.get("answer_label"),
        "agrees_with_judge": None if agrees is None else bool(agrees),
        "labelled_at": _utc(label["labelled_at"]),
    }


def comparable(columns: Mapping[str, Any]) -> dict[str, Any]:
    """Column values in one form whatever the database returned: times as naive UTC ISO
    text, booleans as booleans."""
    out: dict[str, Any] = {}
    for name, value in columns.items():
        if isinstance(value, datetime):
            out[name] = _naive_utc(value).isoformat()
        elif isinstance(value, int) and name in ("hallucinated", "agrees_with_judge"):
            out[name] = bool(value)
        else:
            out[name] = value
    return out


def columns_digest(columns: Mapping[str, Any], leaf_hash_hex: str) -> str:
    """sha256 (hex) binding a purged row's columns to its leaf: what a purge entry
    signs for each row it purges."""
    document = {**comparable(columns), "leaf_hash": leaf_hash_hex}
    return hashlib.sha256(canonical_json(document)).hexdigest()


def _utc(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return _naive_utc(moment)


def _naive_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)
