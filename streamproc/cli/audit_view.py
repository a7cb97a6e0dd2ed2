"""How a stored audit record looks to an auditor: ``audit show --plain`` as one fact per
line (texts unwrapped and exact, for scripts and diffs) and the rich complaint view
(claims coloured by verdict, the evidence that decided each, the reviewers' labels)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from streamproc.audit.store import RecordSummary, StoredLabel, StoredRecord
    from streamproc.contracts.audit_record import AuditRecord

__all__ = ["label_lines", "plain_lines", "render", "render_found"]

_VERDICT_STYLE = {
    "supported": "bold green",
    "contradicted": "bold white on red",
    "unsupported": "bold black on yellow",
    None: "dim",
}
_ACTION_STYLE = {"pass": "green", "trim": "yellow", "withhold": "bold red"}


def plain_lines(stored: StoredRecord, labels: Sequence[StoredLabel] = ()) -> list[str]:
    """``audit show --plain``: one fact per line, texts unwrapped and exact; the
    reviewers' ``labels`` last."""
    s = stored.summary
    lines = [
        f"answer_id: {s.answer_id}",
        f"conversation_id: {s.conversation_id}",
        f"tenant: {s.tenant}",
        f"assistant_id: {s.assistant_id}",
        f"model: {s.model}",
        f"occurred_at: {s.occurred_at.isoformat()}",
        f"action: {s.action}",
        f"hallucinated: {str(s.hallucinated).lower()}",
        f"chain: partition {s.partition} seq {s.seq} offset {s.offset}",
        f"leaf_hash: {stored.leaf_hash}",
        f"chain_hash: {stored.chain_hash}",
    ]
    record = stored.record
    if record is None:
        purged = s.purged_at.isoformat() if s.purged_at else "?"
        return [
            *lines,
            f"purged_at: {purged} (texts and evidence removed; hashes kept)",
            *label_lines(labels, None),
        ]
    lines += [
        f"trace_id: {record.trace_id or '-'}",
        f"judged_at: {record.judged_at.isoformat()}",
        f"input: {record.origin.describe()}",
        f"event_sha256: {record.event_sha256}",
        f"judge: {record.judge.name} {record.judge.version} ({record.judge.granularity})",
        f"calibrator: {record.calibrator or '-'}",
        f"code_version: {record.code_version}",
    ]
    lines += [f"model_sha256: {name} {sha}" for name, sha in sorted(record.judge.models.items())]
    lines += [f"threshold: {k} = {v:g}" for k, v in sorted(record.judge.thresholds.items())]
    lines += [f"question: {record.question or ''}", f"answer: {record.answer}"]
    for claim in record.claims:
        verdict = claim.verdict.value if claim.verdict else "unchecked"
        score = "-" if claim.score is None else f"{claim.score:.3f}"
        lines += [
            f"claim {claim.index + 1} [{claim.start}:{claim.end}] {verdict} "
            f"(class {claim.claim_class.value}, score {score}, "
            f"confidence {claim.confidence.value if claim.confidence else '-'}): {claim.text}",
        ]
        lines += [f"  reason: {reason}" for reason in claim.reasons]
        lines += [f"  citation: {cited}" for cited in claim.citations]
        for evidence_id in claim.evidence_ids:
            lines.append(f"  evidence {evidence_id}: {_evidence(record, evidence_id)}")
            fields = _fields(record, evidence_id)
            if fields:
                lines.append(f"  evidence {evidence_id} fields: {fields}")
    return lines + label_lines(labels, record)


def label_lines(labels: Sequence[StoredLabel], record: AuditRecord | None) -> list[str]:
    """The "reviewer labels" section of ``audit show --plain``: each label, whether it
    agrees with the judge, the claims labelled otherwise (the judge's verdict from
    ``record``, None once purged), the note, and its place in the chain."""
    from streamproc.audit.label_rows import disagreements

    if not labels:
        return ["reviewer labels: none"]
    lines = [f"reviewer labels: {len(labels)}"]
    for label in labels:
        lines.append(
            f"label {label.label_id} by {label.reviewer} at {label.labelled_at.isoformat()}: "
            f"{label.answer_label or 'cant_tell'}, {_agreement(label.agrees_with_judge)}"
        )
        entry = label.entry
        if entry is None:
            purged = label.purged_at.isoformat() if label.purged_at else "?"
            lines.append(f"  purged_at: {purged} (claims and note removed; hashes kept)")
        else:
            claims = None if record is None else record.claims
            lines += [f"  {found.describe()}" for found in disagreements(entry, claims)]
            lines.append(f"  note: {entry.label.note or '-'}")
            lines.append(f"  source: {entry.label.source}")
        lines.append(
            f"  chain: partition {label.partition} seq {label.seq} offset {label.offset} "
            f"leaf_hash {label.leaf_hash}"
        )
    return lines


def _agreement(agrees: bool | None) -> str:
    if agrees is None:
        return "no answer label to compare with the judge"
    return "agrees with the judge" if agrees else "disagrees with the judge"


def render(stored: StoredRecord, console: Console, labels: Sequence[StoredLabel] = ()) -> None:
    """``audit show``: the complaint view, with rich; the reviewers' ``labels`` after
    the claims."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    s = stored.summary
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    _row(facts, "answer", s.answer_id)
    _row(facts, "conversation", s.conversation_id)
    _row(facts, "tenant / assistant", f"{s.tenant} / {s.assistant_id}")
    _row(facts, "model", s.model)
    _row(facts, "occurred at", s.occurred_at.isoformat())
    _row(facts, "action", Text(s.action, style=_ACTION_STYLE.get(s.action, "")))
    _row(facts, "chain", f"partition {s.partition}, seq {s.seq} (audit offset {s.offset})")
    _row(facts, "leaf / chain hash", f"{stored.leaf_hash}\n{stored.chain_hash}")
    record = stored.record
    if record is None:
        _row(facts, "purged at", s.purged_at.isoformat() if s.purged_at else "?")
        console.print(Panel(facts, title="audit record (purged: texts removed, hashes kept)"))
        _render_labels(labels, None, console)
        return
    _row(facts, "trace id", record.trace_id or "-")
    _row(facts, "judged at", record.judged_at.isoformat())
    _row(facts, "input", record.origin.describe())
    _row(facts, "event sha256", record.event_sha256)
    _row(facts, "code version", record.code_version)
    console.print(Panel(facts, title=Text(f"audit record {s.answer_id}")))

    if record.question:
        console.print(Panel(Text(record.question), title="question"))
    console.print(Panel(_highlighted(record), title="answer (claims coloured by verdict)"))

    claims = Table("#", "claim", "verdict", "score", "reasons", "evidence", title="claims")
    for claim in record.claims:
        verdict = claim.verdict.value if claim.verdict else None
        _row(
            claims,
            str(claim.index + 1),
            claim.text,
            Text(verdict or "unchecked", style=_VERDICT_STYLE[verdict]),
            "-" if claim.score is None else f"{claim.score:.3f}",
            "\n".join(claim.reasons) or "-",
            ", ".join(claim.evidence_ids) or "-",
        )
    console.print(claims)
    _render_labels(labels, record, console)

    decided: dict[str, list[int]] = {}  # evidence id -> the claims it decided, in order
    for claim in record.claims:
        for evidence_id in claim.evidence_ids:
            decided.setdefault(evidence_id, []).append(claim.index + 1)
    for evidence_id, claims_decided in decided.items():
        body = _evidence(record, evidence_id)
        fields = _fields(record, evidence_id)
        if fields:
            body += f"\n\nfields: {fields}"
        which = ", ".join(str(n) for n in claims_decided)
        noun = "claim" if len(claims_decided) == 1 else "claims"
        title = f"evidence {evidence_id} (decided {noun} {which}; as given)"
        console.print(Panel(Text(body), title=Text(title)))

    judge = Table("judge", "value", title="judge, models and thresholds")
    _row(judge, "judge", f"{record.judge.name} {record.judge.version}")
    _row(judge, "granularity", record.judge.granularity)
    _row(judge, "calibrator", record.calibrator or "-")
    for name, sha in sorted(record.judge.models.items()):
        _row(judge, f"model {name}", sha)
    for key, value in sorted(record.judge.thresholds.items()):
        _row(judge, key, f"{value:g}")
    console.print(judge)


def _render_labels(
    labels: Sequence[StoredLabel], record: AuditRecord | None, console: Console
) -> None:
    """The reviewer labels, one panel each: who agreed with the judge, on which claims
    not, and the note (a grid, not a wide table: notes and claims wrap whole)."""
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    from streamproc.audit.label_rows import disagreements

    console.print(Rule(Text(f"reviewer labels ({len(labels)})")))
    if not labels:
        console.print(Text("no reviewer labels", style="dim"))
        return
    for label in labels:
        agrees = label.agrees_with_judge
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        _row(facts, "labelled at", label.labelled_at.isoformat())
        _row(facts, "answer label", label.answer_label or "cant_tell")
        _row(
            facts,
            "judge",
            Text(
                _agreement(agrees),
                style="" if agrees is None else ("green" if agrees else "bold red"),
            ),
        )
        entry = label.entry
        if entry is None:
            _row(facts, "purged at", label.purged_at.isoformat() if label.purged_at else "?")
        else:
            found = disagreements(entry, None if record is None else record.claims)
            otherwise = "\n".join(d.describe() for d in found) or "-"
            _row(facts, "claims labelled otherwise", otherwise)
            _row(facts, "note", entry.label.note or "-")
            _row(facts, "source", entry.label.source)
        _row(facts, "chain", f"partition {label.partition}, seq {label.seq}")
        _row(facts, "leaf hash", Text(label.leaf_hash, overflow="fold"))
        title = Text(f"label {label.label_id} by {label.reviewer}")
        console.print(Panel(facts, title=title))


def render_found(found: Sequence[RecordSummary], console: Console, limit_reached: bool) -> None:
    """``audit find``: one row per record, oldest first as the store returns them."""
    from rich.table import Table
    from rich.text import Text

    table = Table("answer", "occurred (UTC)", "conversation", "tenant", "assistant", "action")
    for s in found:
        _row(
            table,
            s.answer_id + (" (purged)" if s.purged_at else ""),
            s.occurred_at.strftime("%Y-%m-%d %H:%M:%S"),
            s.conversation_id,
            s.tenant,
            s.assistant_id,
            Text(s.action, style=_ACTION_STYLE.get(s.action, "")),
        )
    console.print(table)
    console.print(f"{len(found)} record(s)" + (" (limit reached)" if limit_reached else ""))


def _row(table: Any, *cells: object) -> None:
    """A table row whose cells are never read as rich markup: answer ids, claims and
    reasons are data, and a "[/]" in them must print, not raise."""
    from rich.text import Text

    table.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in cells))


def _highlighted(record: AuditRecord) -> Any:
    from rich.text import Text

    text = Text(record.answer)
    for claim in record.claims:
        verdict = claim.verdict.value if claim.verdict else None
        end = min(claim.end, len(record.answer))
        if 0 <= claim.start < end:
            text.stylize(_VERDICT_STYLE[verdict], claim.start, end)
    return text


def _evidence(record: AuditRecord, evidence_id: str) -> str:
    found = record.evidence_text(evidence_id)
    return "(not among the evidence items)" if found is None else found


def _fields(record: AuditRecord, evidence_id: str) -> str:
    """A record or tool result's structured fields, as JSON ("" when it has none)."""
    item = next((item for item in record.evidence if item.id == evidence_id), None)
    if item is None or not item.fields:
        return ""
    return json.dumps(item.fields, ensure_ascii=False, sort_keys=True)
