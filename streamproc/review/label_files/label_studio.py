"""Label Studio's JSON export, read as label events (docs/labels.md has the labelling
config this expects).

The export is a list of tasks; each has ``data`` (what ``review export`` or the operator
put there: ``answer_id``, ``tenant``, the texts) and ``annotations``, one per annotator,
whose ``result`` holds one entry per control: ``{"from_name": "answer", "type":
"choices", "value": {"choices": ["Hallucinated"]}}``. The controls read are a
``Choices`` named ``answer`` (Hallucinated / Faithful / Can't tell), one ``Choices``
per claim named ``claim_<index>`` (Supported / Contradicted / Unsupported / Can't
tell; the index is the claim's in the judge's verdict) and an optional ``TextArea``
named ``note``. Cancelled (skipped) annotations are left out. Each annotation becomes
one :class:`~streamproc.contracts.label_events.LabelEvent` with source ``label-studio``; an
``author`` (an import without a reviewer token) replaces every annotator's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from streamproc.contracts.label_events import AnswerLabel, ClaimLabelValue, LabelEvent
from streamproc.review.label_files.label_file import LabelFileError, label_from_object

__all__ = [
    "ANSWER_CONTROL",
    "CLAIM_CONTROL",
    "NOTE_CONTROL",
    "SOURCE",
    "labels_from_export",
    "read_label_studio",
]

ANSWER_CONTROL: Final = "answer"
CLAIM_CONTROL: Final = re.compile(r"^claim_(\d+)$")
NOTE_CONTROL: Final = "note"
SOURCE: Final = "label-studio"

_ANSWER_CHOICES: Final[Mapping[str, AnswerLabel | None]] = {
    "hallucinated": "hallucinated",
    "faithful": "faithful",
    "cant tell": None,
}
_CLAIM_CHOICES: Final = {
    "supported": ClaimLabelValue.SUPPORTED,
    "contradicted": ClaimLabelValue.CONTRADICTED,
    "unsupported": ClaimLabelValue.UNSUPPORTED,
    "cant tell": ClaimLabelValue.CANT_TELL,
}


def _choice_key(choice: str) -> str:
    """ "Can't tell", "cant_tell" (and a typographic apostrophe) -> "cant tell"."""
    return re.sub(r"[\s_]+", " ", re.sub("['\u2019]", "", choice)).strip().lower()


def _reviewer(completed_by: Any, fallback: str | None) -> str | None:
    """The annotator: an email or ``label-studio:<user id>``; ``fallback`` without one."""
    if isinstance(completed_by, Mapping):
        email = completed_by.get("email")
        if email:
            return str(email)
        completed_by = completed_by.get("id")
    if isinstance(completed_by, str) and completed_by.strip():
        return completed_by.strip()
    if isinstance(completed_by, int) and not isinstance(completed_by, bool):
        return f"{SOURCE}:{completed_by}"
    return fallback


def _choices(entry: Mapping[str, Any]) -> list[str]:
    value = entry.get("value") or {}
    choices = value.get("choices") if isinstance(value, Mapping) else None
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError(f"control {entry.get('from_name')!r}: value.choices must be strings")
    return choices


def _one(entry: Mapping[str, Any], table: Mapping[str, Any]) -> Any:
    choices = _choices(entry)
    if len(choices) != 1 or _choice_key(choices[0]) not in table:
        known = ", ".join(sorted(table))
        raise ValueError(
            f"control {entry.get('from_name')!r}: expected one of {known}, got {choices}"
        )
    return table[_choice_key(choices[0])]


def _annotation_fields(result: Sequence[Any]) -> dict[str, Any]:
    """answer_label, claims and note from one annotation's ``result`` entries."""
    answer: tuple[AnswerLabel | None] | None = None
    claims: dict[int, ClaimLabelValue] = {}
    notes: list[str] = []
    for entry in result:
        if not isinstance(entry, Mapping):
            raise ValueError("a result entry is not an object")
        name = str(entry.get("from_name", ""))
        claim = CLAIM_CONTROL.match(name)
        if name == ANSWER_CONTROL:
            answer = (_one(entry, _ANSWER_CHOICES),)
        elif claim is not None:
            claims[int(claim.group(1))] = _one(entry, _CLAIM_CHOICES)
        elif name == NOTE_CONTROL:
            text = (entry.get("value") or {}).get("text") or []
            notes += [text] if isinstance(text, str) else [str(t) for t in text]
    if answer is None:
        raise ValueError(f"no {ANSWER_CONTROL!r} choice (the answer's label is required)")
    return {
        "answer_label": answer[0],
        "claims": [{"index": i, "label": v.value} for i, v in sorted(claims.items())],
        "note": "\n".join(n for n in notes if n.strip()) or None,
    }


def _task_labels(
    task: Mapping[str, Any], reviewer: str | None, tenant: str | None, author: str | None
) -> list[LabelEvent]:
    data = task.get("data")
    if not isinstance(data, Mapping) or not data.get("answer_id"):
        raise ValueError("data.answer_id is missing (the export must carry the answer id)")
    labels = []
    for number, annotation in enumerate(task.get("annotations") or [], start=1):
        where = f"annotation {number} (id {annotation.get('id')})"
        if annotation.get("was_cancelled"):
            continue
        try:
            row = {
                "answer_id": str(data["answer_id"]),
                "tenant": data.get("tenant"),
                "reviewer": _reviewer(annotation.get("completed_by"), reviewer),
                "labelled_at": annotation.get("updated_at") or annotation.get("created_at"),
                **_annotation_fields(annotation.get("result") or []),
            }
            labels.append(label_from_object(row, tenant=tenant, source=SOURCE, author=author))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()
            )
            raise ValueError(f"{where}: {problems}") from None
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    return labels


def labels_from_export(
    tasks: Any,
    *,
    reviewer: str | None = None,
    tenant: str | None = None,
    name: str = "export",
    author: str | None = None,
) -> list[LabelEvent]:
    """Label events of an export's tasks, in order; :class:`LabelFileError` naming the
    task and annotation of every problem (up to ten)."""
    if not isinstance(tasks, list):
        raise LabelFileError(f"{name}: a Label Studio JSON export is a list of tasks")
    labels: list[LabelEvent] = []
    errors: list[str] = []
    for number, task in enumerate(tasks, start=1):
        try:
            if not isinstance(task, Mapping):
                raise ValueError("not an object")
            labels += _task_labels(task, reviewer, tenant, author)
        except ValueError as error:
            task_id = task.get("id") if isinstance(task, Mapping) else None
            errors.append(f"task {number} (id {task_id}): {error}")
    if errors:
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise LabelFileError(f"{name}: " + " | ".join(errors[:10]) + more)
    if not labels:
        raise LabelFileError(f"{name}: no completed annotations")
    return labels


def read_label_studio(
    path: Path,
    *,
    reviewer: str | None = None,
    tenant: str | None = None,
    author: str | None = None,
) -> list[LabelEvent]:
    """:func:`labels_from_export` of a Label Studio JSON export file."""
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise LabelFileError(f"cannot read {path}: {error}") from None
    except json.JSONDecodeError as error:
        raise LabelFileError(
            f"{path.name}: line {error.lineno} is not valid JSON ({error.msg})"
        ) from None
    return labels_from_export(
        tasks, reviewer=reviewer, tenant=tenant, name=path.name, author=author
    )
