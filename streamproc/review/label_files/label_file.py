"""The label file: one
:class:`~streamproc.contracts.label_events.LabelEvent` a line (docs/labels.md).

A line may leave out ``label_id`` (then it is a uuid5 of answer id, reviewer and
``labelled_at``, so importing the same file twice publishes the same ids and the labels
loop counts each once), ``reviewer`` and ``tenant`` (then the importing reviewer and
``--tenant`` fill them in) and ``source`` ("import"). An ``author`` replaces every
line's reviewer: an import without a reviewer token records its labels as by
``import:<file name>``. ``labelled_at`` is required and must carry its
time zone: a label's time is what drift baselines are cut by, so it is never guessed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from streamproc.contracts.label_events import LabelEvent

__all__ = [
    "LABEL_ID_NAMESPACE",
    "LabelFileError",
    "default_label_id",
    "label_from_object",
    "read_label_file",
]

LABEL_ID_NAMESPACE: Final = uuid.UUID("6f1c2e0a-4b7d-5d1e-9a3c-2f8e6b0d4c51")
"""The uuid5 namespace of label ids made on import (fixed: re-imports give the same ids)."""
_MAX_ERRORS: Final = 10


class LabelFileError(ValueError):
    """A label file we cannot use; the message names the file and the lines."""


def default_label_id(answer_id: str, reviewer: str, labelled_at: datetime | str) -> str:
    """uuid5 of (answer id, reviewer, labelled_at as ISO 8601): idempotent re-imports."""
    when = labelled_at.isoformat() if isinstance(labelled_at, datetime) else str(labelled_at)
    return str(uuid.uuid5(LABEL_ID_NAMESPACE, "\x1f".join((answer_id, reviewer, when))))


def label_from_object(
    row: Mapping[str, Any],
    *,
    reviewer: str | None = None,
    tenant: str | None = None,
    source: str = "import",
    author: str | None = None,
) -> LabelEvent:
    """One label from its JSON object: ``reviewer`` / ``tenant`` fill in missing fields;
    a line naming another tenant than ``tenant`` is refused (an import is for one);
    ``author``, when given, is the reviewer whatever the line says."""
    data = dict(row)
    if author is not None:
        data["reviewer"] = author
    if tenant is not None:
        if data.get("tenant") not in (None, tenant):
            raise ValueError(f"tenant {data['tenant']!r} is not the imported tenant {tenant!r}")
        data["tenant"] = tenant
    if reviewer is not None and not data.get("reviewer"):
        data["reviewer"] = reviewer
    data.setdefault("source", source)
    if not data.get("label_id"):
        missing = [k for k in ("answer_id", "reviewer", "labelled_at") if not data.get(k)]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        label = LabelEvent.model_validate({**data, "label_id": "pending"})
        label_id = default_label_id(label.answer_id, label.reviewer, label.labelled_at)
        return label.model_copy(update={"label_id": label_id})
    return LabelEvent.model_validate(data)


def _objects(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LabelFileError(f"cannot read {path}: {error}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                yield number, error


def _explain(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in error.errors()
        )
    return str(error)


def read_label_file(
    path: Path,
    *,
    reviewer: str | None = None,
    tenant: str | None = None,
    author: str | None = None,
) -> list[LabelEvent]:
    """Every label of ``path``; :class:`LabelFileError` listing the bad lines (all of
    them up to ten) when any line is not a usable label - nothing is half-imported."""
    labels: list[LabelEvent] = []
    errors: list[str] = []
    for number, row in _objects(path):
        try:
            if isinstance(row, json.JSONDecodeError):
                raise ValueError(f"not valid JSON ({row.msg})")
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            labels.append(label_from_object(row, reviewer=reviewer, tenant=tenant, author=author))
        except (ValidationError, ValueError) as error:
            errors.append(f"line {number}: {_explain(error)}")
    if errors:
        shown = errors[:_MAX_ERRORS]
        more = f" (and {len(errors) - len(shown)} more)" if len(errors) > len(shown) else ""
        raise LabelFileError(f"{path.name}: " + " | ".join(shown) + more)
    if not labels:
        raise LabelFileError(f"{path.name}: no labels")
    return labels
