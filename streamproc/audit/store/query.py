"""Which records an audit search or export selects: one frozen query object, the same
for :meth:`AuditStore.find`, :meth:`AuditStore.export`, :meth:`AuditStore.export_labels`
and :meth:`AuditStore.export_entries`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from sqlalchemy.sql.elements import ColumnElement

from streamproc.audit.store._results import _utc
from streamproc.audit.store._schema import _records
from streamproc.contracts.events import Action

__all__ = ["AuditQuery"]


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Every given filter must match (None: any). Time is the answer's ``occurred_at``,
    ``since`` inclusive and ``until`` exclusive (a naive time is UTC). ``partition`` is
    the audit-topic partition of the chain: a record's own for records, a label's own
    for labels."""

    conversation: str | None = None
    tenant: str | None = None
    assistant: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    hallucinated: bool | None = None
    action: Action | str | None = None
    partition: int | None = None

    @property
    def selects_records(self) -> bool:
        """Whether any filter on the records is given (``partition`` aside): an export
        then holds the matching records' links only, not every link of the chains."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "partition")

    def record_conditions(self) -> list[ColumnElement[bool]]:
        """The filters on the records table, ``partition`` aside."""
        where: list[ColumnElement[bool]] = []
        if self.conversation is not None:
            where.append(_records.c.conversation_id == self.conversation)
        if self.tenant is not None:
            where.append(_records.c.tenant == self.tenant)
        if self.assistant is not None:
            where.append(_records.c.assistant_id == self.assistant)
        if self.since is not None:
            where.append(_records.c.occurred_at >= _utc(self.since))
        if self.until is not None:
            where.append(_records.c.occurred_at < _utc(self.until))
        if self.hallucinated is not None:
            where.append(_records.c.hallucinated == self.hallucinated)
        if self.action is not None:
            where.append(_records.c.action == Action(self.action).value)
        return where
