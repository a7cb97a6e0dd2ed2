"""The auditor's commands: ``streamproc audit show | find | export | verify | purge |
keygen | checkpoints`` and ``streamproc audit-sink``.

``audit show`` answers a complaint: the answer with each claim highlighted by its
verdict, the reasons, the evidence that decided each claim exactly as the assistant was
given it, the models with their sha256, the thresholds and the trace id, then the
reviewers' labels of the answer (who agreed or disagreed with the judge, on which
claims; each label is a link of the audit chain too). It renders with rich for people;
``--plain`` prints unwrapped text lines and ``--json`` the stored record with its chain
hashes and its labels, for scripts. ``export`` writes records and labels, in chain
order. Every command reads ``settings.audit.store_url``
unless ``--store URL`` says otherwise, and names the store it read on stderr; none but
``audit-sink`` creates a store: where there is none, or the database cannot be reached,
they say so in one line naming the URL (password hidden) and exit 3. None of them needs a
broker except ``purge
--conversation`` (tombstones on the audit topic, unless ``--no-topic``), ``verify
--topic-checkpoints`` and ``checkpoints --topic``.

``show``, ``find`` and ``export`` print what the hashed record says (the indexed
columns only once a record is purged, when a signed purge entry vouches for them), and
``verify`` checks every indexed column against the hashed record, the checkpoints'
and purge entries' Ed25519 signatures (``keygen`` makes the key pair; ``verify`` needs
only the public key) and says what it could not prove.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamproc.audit.store import (
        AuditQuery,
        AuditStore,
        StoredLabel,
        StoredPurge,
        StoredRecord,
    )
    from streamproc.config import Settings

from streamproc.cli.audit_view import plain_lines, render, render_found

__all__ = ["register"]

EXIT_NOT_FOUND = 1
EXIT_VERIFY_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_STORE = 3
"""No audit store could be read at the URL: none is there, or the database is unreachable."""

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``audit`` and ``audit-sink`` subcommands."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store", metavar="URL", help="audit store URL (default: STREAMPROC_AUDIT__STORE_URL)"
    )

    sink = subparsers.add_parser(
        "audit-sink",
        parents=[store],
        help="store the audit topic in the audit store (settings: STREAMPROC_*)",
    )
    sink.set_defaults(func=_run_sink)

    audit = subparsers.add_parser(
        "audit", help="the audit trail: show | find | export | verify | purge"
    )
    commands = audit.add_subparsers(metavar="ACTION")

    show = commands.add_parser(
        "show", parents=[store], help="everything about one answer, for a complaint"
    )
    show.add_argument("answer_id")
    show.add_argument("--tenant", help="whose answer, when tenants share the answer id")
    mode = show.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="the stored record and its hashes")
    mode.add_argument("--plain", action="store_true", help="unwrapped text, no colours")
    show.set_defaults(func=_show)

    find = commands.add_parser("find", parents=[store], help="records matching filters")
    _add_filters(find)
    find.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    find.add_argument("--json", action="store_true", help="JSON lines")
    find.set_defaults(func=_find)

    export = commands.add_parser(
        "export",
        parents=[store],
        help="records and reviewers' labels as JSON lines, in chain order",
    )
    _add_filters(export)
    export.add_argument("--partition", type=int)
    export.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")
    export.set_defaults(func=_export)

    verify = commands.add_parser(
        "verify", parents=[store], help="check the hash chains; name the first bad record"
    )
    verify.add_argument("--partition", type=int, help="one chain (default: all)")
    verify.add_argument("--since-seq", type=int)
    verify.add_argument("--until-seq", type=int)
    verify.add_argument(
        "--topic-checkpoints",
        action="store_true",
        help="also check against the signed chain heads published on the checkpoint topic",
    )
    verify.add_argument(
        "--checkpoints",
        metavar="FILE",
        type=Path,
        help="also check against the checkpoints in FILE (JSON lines, as on the topic)",
    )
    verify.add_argument(
        "--public-key",
        metavar="FILE",
        type=Path,
        help="Ed25519 public key (PEM) (default: STREAMPROC_AUDIT__VERIFY_KEY_FILE)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=_verify)

    keygen = commands.add_parser(
        "keygen", help="a new Ed25519 key pair for signing checkpoints and purges"
    )
    keygen.add_argument("--private", metavar="FILE", type=Path, required=True)
    keygen.add_argument("--public", metavar="FILE", type=Path, required=True)
    keygen.set_defaults(func=_keygen)

    marks = commands.add_parser(
        "checkpoints",
        parents=[store],
        help="the signed checkpoints as JSON lines (a copy to keep apart from the store)",
    )
    marks.add_argument(
        "--topic", action="store_true", help="read the checkpoint topic, not the store"
    )
    marks.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")
    marks.set_defaults(func=_checkpoints)

    purge = commands.add_parser(
        "purge", parents=[store], help="remove texts and evidence, keep the hashes"
    )
    which = purge.add_mutually_exclusive_group(required=True)
    which.add_argument("--conversation", metavar="ID", help="every record of one conversation")
    which.add_argument(
        "--expired", action="store_true", help="records older than STREAMPROC_AUDIT__RETENTION_DAYS"
    )
    purge.add_argument("--days", type=int, help="with --expired: this retention instead")
    purge.add_argument(
        "--no-topic",
        action="store_true",
        help="with --conversation: publish no tombstones to the audit topic and leave the "
        "purge's signed checkpoints for the sink to publish",
    )
    purge.add_argument(
        "--signing-key",
        metavar="FILE",
        type=Path,
        help="Ed25519 private key (PEM) (default: STREAMPROC_AUDIT__SIGNING_KEY_FILE)",
    )
    purge.set_defaults(func=_purge)

    def _audit_help(args: argparse.Namespace) -> int:
        audit.print_help()
        return 2

    audit.set_defaults(func=_audit_help)


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", metavar="ID")
    parser.add_argument("--tenant")
    parser.add_argument("--assistant", metavar="ID")
    parser.add_argument(
        "--since", type=_moment, help="answers from (ISO 8601 or e.g. 24h, 7d ago; UTC if no zone)"
    )
    parser.add_argument("--until", type=_moment, help="answers before (same forms)")
    flagged = parser.add_mutually_exclusive_group()
    flagged.add_argument("--hallucinated", dest="hallucinated", action="store_true", default=None)
    flagged.add_argument("--not-hallucinated", dest="hallucinated", action="store_false")
    parser.add_argument("--action", choices=["pass", "trim", "withhold"])


def _moment(text: str) -> datetime:
    relative = _RELATIVE.match(text.strip())
    if relative:
        amount, unit = relative.groups()
        return datetime.now(UTC) - timedelta(**{_UNITS[unit]: int(amount)})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO 8601, or 24h / 7d)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _settings(args: argparse.Namespace) -> Settings:
    from streamproc.config import Settings

    settings = Settings()
    url = getattr(args, "store", None)
    if url:
        audit = settings.audit.model_copy(update={"store_url": url})
        settings = settings.model_copy(update={"audit": audit})
    return settings


def _open(args: argparse.Namespace) -> AuditStore:
    return _open_store(_settings(args).audit.store_url)


def _open_store(url: str) -> AuditStore:
    """The existing store at ``url``, connected, and named on stderr. Raises
    :class:`~streamproc.sql_store.StoreMissing` where there is none (a reader
    never creates one) and SQLAlchemy's errors where the database cannot be reached;
    :func:`_reads_store` turns both into one line."""
    from streamproc.audit.store import AuditStore
    from streamproc.sql_store import shown_url

    store = AuditStore(url, create=False)
    try:
        store.open()
    except BaseException:
        store.close()
        raise
    print(f"audit store: {shown_url(url)}", file=sys.stderr)
    return store


def _reads_store(
    name: str,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """A command that reads the store: a missing or unreachable store is one line on
    stderr naming the URL (password hidden) and :data:`EXIT_NO_STORE`, no traceback."""

    def wrap(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @wraps(command)
        def run(args: argparse.Namespace) -> int:
            from sqlalchemy.exc import DBAPIError, SQLAlchemyError

            from streamproc.sql_store import StoreMissing, shown_url

            try:
                return command(args)
            except StoreMissing as exc:
                print(
                    f"audit {name}: no audit store at {shown_url(exc.url)}: {exc.why} "
                    "(read commands never create one; set STREAMPROC_AUDIT__STORE_URL "
                    "or give --store URL)",
                    file=sys.stderr,
                )
            except (SQLAlchemyError, ImportError) as exc:
                cause = exc.orig if isinstance(exc, DBAPIError) else exc
                why = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
                url = shown_url(_settings(args).audit.store_url)
                print(f"audit {name}: cannot read the audit store at {url}: {why}", file=sys.stderr)
            return EXIT_NO_STORE

        return run

    return wrap


def _query(args: argparse.Namespace) -> AuditQuery:
    """The filters of ``find`` and ``export`` as the store's query."""
    from streamproc.audit.store import AuditQuery

    return AuditQuery(
        conversation=args.conversation,
        tenant=args.tenant,
        assistant=args.assistant,
        since=args.since,
        until=args.until,
        hallucinated=args.hallucinated,
        action=args.action,
        partition=getattr(args, "partition", None),
    )


# --- commands -------------------------------------------------------------------------


def _run_sink(args: argparse.Namespace) -> int:
    from streamproc.audit.sink import run_audit_sink
    from streamproc.telemetry.logging import configure_logging
    from streamproc.wiring import kafka_loop_options, topic_layout

    settings = _settings(args)
    configure_logging(
        settings.log_level, json_logs=settings.log_json, log_texts=settings.audit.log_texts
    )
    return run_audit_sink(kafka_loop_options(settings), settings.audit, topic_layout(settings))


@_reads_store("show")
def _show(args: argparse.Namespace) -> int:
    from streamproc.audit.store import AmbiguousAnswer

    with _open(args) as store:
        try:
            stored = store.get(args.answer_id, args.tenant)
        except AmbiguousAnswer as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_USAGE
        labels = (
            store.labels_for(args.answer_id, stored.summary.tenant) if stored is not None else []
        )
    if stored is None:
        print(f"no audit record for answer {args.answer_id!r}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        document = {**stored.as_json(), "labels": [label.as_json() for label in labels]}
        print(json.dumps(document, ensure_ascii=False, indent=2))
    elif args.plain:
        sys.stdout.write("\n".join(plain_lines(stored, labels)) + "\n")
    else:
        from rich.console import Console

        render(stored, Console(highlight=False), labels)
    return 0


@_reads_store("find")
def _find(args: argparse.Namespace) -> int:
    with _open(args) as store:
        found = store.find(_query(args), limit=args.limit)
    if args.json:
        for summary in found:
            print(json.dumps(summary.as_json(), ensure_ascii=False))
        return 0
    from rich.console import Console

    render_found(found, Console(highlight=False), limit_reached=len(found) == args.limit)
    return 0


@_reads_store("export")
def _export(args: argparse.Namespace) -> int:
    with _open(args) as store:
        entries = store.export_entries(_query(args))
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                records, labels = _write_lines(entries, out)
            print(
                f"exported {records} record(s) and {labels} label(s) to {args.output}",
                file=sys.stderr,
            )
        else:
            _write_lines(entries, sys.stdout)
    return 0


def _write_lines(
    entries: Iterable[StoredRecord | StoredLabel | StoredPurge], out: IO[str]
) -> tuple[int, int]:
    """One JSON line per record, label (``"kind": "audit_label"``) or purge entry
    (``"audit_purge"``), in chain order; returns how many records and labels."""
    records = labels = 0
    for stored in entries:
        line = stored.as_json()
        out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        if line.get("kind") == "audit_label":
            labels += 1
        elif line.get("kind") != "audit_purge":
            records += 1
    return records, labels


@_reads_store("verify")
def _verify(args: argparse.Namespace) -> int:
    from streamproc.audit.signing import KeyFileError, SignatureChecker

    settings = _settings(args)
    key = args.public_key or settings.audit.verify_key_file
    try:
        checker = None if key is None else SignatureChecker.from_file(key)
        extra = _outside_checkpoints(args, settings)
    except (KeyFileError, OSError, ValueError) as exc:
        print(f"audit verify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with _open_store(settings.audit.store_url) as store:
        report = store.verify(
            args.partition,
            args.since_seq,
            args.until_seq,
            extra_checkpoints=extra,
            checker=checker,
        )
    if args.json:
        print(json.dumps(_report_json(report)))
    else:
        print(report.describe())
        for line in report.not_proven:
            print(f"NOT PROVEN: {line}")
    first = report.first_problem
    if first is None:
        if not args.json:
            print("OK: every chain verifies")
        return 0
    assert first.problem is not None
    who = first.problem.name or "(missing record)"
    if first.problem.label_id is not None:
        who = f"{who}, label {first.problem.label_id}"
    print(
        f"FAILED: first bad record: partition {first.partition}, seq {first.problem.seq}, "
        f"answer {who}: {first.problem.problem}",
        file=sys.stderr,
    )
    return EXIT_VERIFY_FAILED


def _outside_checkpoints(args: argparse.Namespace, settings: Settings) -> dict[int, list[Any]]:
    """The checkpoints kept apart from the store: the topic's and a file's."""
    from streamproc.audit.anchors import parse_checkpoint

    found: dict[int, list[Any]] = {}
    if args.topic_checkpoints:
        from streamproc.audit.sink import fetch_topic_checkpoints
        from streamproc.wiring import kafka_connection

        read = fetch_topic_checkpoints(kafka_connection(settings), settings.audit.checkpoint_topic)
        for partition, marks in asyncio.run(read).items():
            found.setdefault(partition, []).extend(marks)
    if args.checkpoints is not None:
        with args.checkpoints.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                mark = parse_checkpoint(json.loads(line))
                if mark is None:
                    raise ValueError(f"{args.checkpoints}:{number}: not a checkpoint")
                found.setdefault(mark.partition, []).append(mark)
    return found


def _report_json(report: Any) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "signatures_checked": report.signatures_checked,
        "not_proven": report.not_proven,
        "partitions": [
            {
                "partition": c.partition,
                "checked": c.checked,
                "records": c.records,
                "labels": c.labels,
                "purges": c.purges,
                "trusted_leaves": c.trusted_leaves,
                "last_seq": c.last_seq,
                "checkpoints": c.checkpoints,
                "signed_checkpoints": c.signed_checkpoints,
                "anchored_seq": c.anchored_seq,
                "unanchored": c.unanchored,
                "problem": None
                if c.problem is None
                else {
                    "seq": c.problem.seq,
                    "answer_id": c.problem.name,
                    "label_id": c.problem.label_id,
                    "problem": c.problem.problem,
                    "detail": c.problem.detail,
                },
            }
            for c in report.partitions
        ],
    }


def _keygen(args: argparse.Namespace) -> int:
    from streamproc.audit.signing import KeyFileError, generate_key_pair

    try:
        key_id = generate_key_pair(args.private, args.public)
    except (KeyFileError, OSError) as exc:
        print(f"audit keygen: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"key {key_id}: private key {args.private} (keep it outside the store: "
        f"STREAMPROC_AUDIT__SIGNING_KEY_FILE), public key {args.public} "
        "(STREAMPROC_AUDIT__VERIFY_KEY_FILE, for audit verify)"
    )
    return 0


@_reads_store("checkpoints")
def _checkpoints(args: argparse.Namespace) -> int:
    settings = _settings(args)
    documents: list[Any] = []
    if args.topic:
        from streamproc.audit.sink import fetch_topic_checkpoints
        from streamproc.wiring import kafka_connection

        marks = asyncio.run(
            fetch_topic_checkpoints(kafka_connection(settings), settings.audit.checkpoint_topic)
        )
        documents = [mark.document for p in sorted(marks) for mark in marks[p]]
    else:
        with _open_store(settings.audit.store_url) as store:
            for partition in store.partitions():
                documents += [mark.as_json() for mark in store.checkpoints(partition)]
    lines = "".join(json.dumps(document, sort_keys=True) + "\n" for document in documents)
    if args.output:
        Path(args.output).write_text(lines, encoding="utf-8")
        print(f"wrote {len(documents)} checkpoint(s) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0


@_reads_store("purge")
def _purge(args: argparse.Namespace) -> int:
    from streamproc.audit.signing import KeyFileError, Signer

    settings = _settings(args)
    key = args.signing_key or settings.audit.signing_key_file
    if key is None:
        print(
            "audit purge: a purge is a signed entry of the chain: set "
            "STREAMPROC_AUDIT__SIGNING_KEY_FILE or give --signing-key",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        signer = Signer.from_file(key)
    except KeyFileError as exc:
        print(f"audit purge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with _open_store(settings.audit.store_url) as store:
        if args.expired:
            days = args.days or settings.audit.retention_days
            count = store.purge_expired(days, signer=signer)
            print(f"purged {count} record(s) older than {days} days; hashes kept")
        else:
            from streamproc.audit.store import AuditQuery

            found = store.find(AuditQuery(conversation=args.conversation), limit=None)
            if found and not args.no_topic:
                from streamproc.audit.sink import label_key, publish_tombstones
                from streamproc.verdicts.catalog import audit_record_key
                from streamproc.wiring import kafka_connection

                keys = [
                    label_key(label.answer_id, label.label_id)
                    for s in found
                    for label in store.labels_for(s.answer_id, s.tenant)
                ]
                # First the topic: a purge that fails half-way is simply run again.
                records = [audit_record_key(s.tenant, s.answer_id) for s in found]
                sent = asyncio.run(
                    publish_tombstones(
                        kafka_connection(settings), settings.audit.topic, records, keys
                    )
                )
                print(f"published {sent} tombstone(s) to {settings.audit.topic}")
            count = store.purge_conversation(args.conversation, signer=signer)
            print(
                f"purged {count} record(s) of conversation {args.conversation}, with their "
                "reviewers' label notes; hashes kept"
            )
        latest = store.latest_checkpoints()
    if args.expired:
        print("the audit sink publishes the purge's signed checkpoints to the checkpoint topic")
    elif count and not args.no_topic:
        from streamproc.audit.sink import publish_checkpoints
        from streamproc.wiring import kafka_connection

        sent = asyncio.run(
            publish_checkpoints(kafka_connection(settings), settings.audit.checkpoint_topic, latest)
        )
        print(f"published {sent} signed checkpoint(s) to {settings.audit.checkpoint_topic}")
    return 0
