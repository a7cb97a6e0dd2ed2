"""The reviewers' commands: ``streamproc review serve`` (the review page),
``streamproc review token`` (a new reviewer token and the line to add for it),
``streamproc review import`` (labels made elsewhere, onto the labels topic) and
``streamproc review export`` (labelled answers in the benchmark JSONL shape).

``review serve`` reads the review queue topic into its store, serves the page on
``settings.review.host``/``port`` (HTTPS with ``tls_cert`` and ``tls_key``) and publishes
every label to the labels topic, until SIGTERM or SIGINT. Without
``settings.review.tokens_file`` it still starts, but refuses every reviewer (and says so).

``review import`` attributes labels only to a reviewer it can prove: with a reviewer
token (``--token-file``, or ``STREAMPROC_REVIEWER_TOKEN``) checked against the tokens
file, every label is that reviewer's; without one, every label's reviewer is the import
itself (``import:<file name>``), whatever the file says.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamproc.config import Settings
    from streamproc.review.page.auth import Reviewers

__all__ = ["register", "serve"]

EXIT_BAD_TOKENS_FILE = 2
EXIT_BAD_TLS = 2
TOKEN_ENV = "STREAMPROC_REVIEWER_TOKEN"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the ``review`` command; returns its actions, so other ``review`` actions
    (import, export) can be added to the same command."""
    review = subparsers.add_parser("review", help="the review page and reviewers' tokens")
    actions = review.add_subparsers(metavar="ACTION")

    serve_parser = actions.add_parser(
        "serve", help="serve the review page until SIGTERM/SIGINT (settings: STREAMPROC_REVIEW__*)"
    )
    serve_parser.add_argument("--host", help="bind here (default: STREAMPROC_REVIEW__HOST)")
    serve_parser.add_argument("--port", type=int, help="port (default: STREAMPROC_REVIEW__PORT)")
    serve_parser.add_argument(
        "--store", metavar="URL", help="queue store URL (default: STREAMPROC_REVIEW__STORE_URL)"
    )
    serve_parser.add_argument(
        "--tokens-file",
        type=Path,
        metavar="FILE",
        help="reviewer tokens (default: STREAMPROC_REVIEW__TOKENS_FILE)",
    )
    serve_parser.set_defaults(func=_serve)

    token = actions.add_parser(
        "token", help="a new reviewer token, and the [[reviewer]] entry for the tokens file"
    )
    token.add_argument("--name", required=True, help="the reviewer's name (on every label)")
    token.add_argument(
        "--tenant",
        action="append",
        required=True,
        help="a tenant the reviewer may see (repeat for several)",
    )
    token.set_defaults(func=_token)

    imports = actions.add_parser(
        "import", help="publish labels from a file (docs/labels.md) to the labels topic"
    )
    imports.add_argument("file", type=Path, help="labels: JSON lines, or Label Studio's export")
    imports.add_argument(
        "--format",
        choices=["jsonl", "label-studio"],
        default="jsonl",
        help="the file's format (default: jsonl)",
    )
    imports.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help=f"a file holding your reviewer token (or set {TOKEN_ENV}): the labels are "
        "then yours; without a token they are recorded as by 'import:<file name>'",
    )
    imports.add_argument(
        "--reviewer",
        help="the reviewer the labels are for: must be the token's reviewer (checked)",
    )
    imports.add_argument("--tenant", help="the tenant of labels that name none (others refused)")
    imports.set_defaults(func=_import)

    export = actions.add_parser(
        "export",
        help="labelled answers (review queue + labels topics) as benchmark JSON lines, for "
        "'eval benchmark --data' and 'calibrate --from-labels'",
    )
    export.add_argument(
        "--output", "-o", type=Path, metavar="FILE", required=True, help="the JSONL file to write"
    )
    export.set_defaults(func=_export)

    def _review_help(args: argparse.Namespace) -> int:
        review.print_help()
        return 2

    review.set_defaults(func=_review_help)
    return actions


def _token(args: argparse.Namespace) -> int:
    from streamproc.review.page.auth import Reviewers
    from streamproc.web.token_file import print_new_token

    print_new_token(
        Reviewers.table,
        args.name,
        args.tenant,
        holder="reviewer",
        tokens_file="the tokens file (STREAMPROC_REVIEW__TOKENS_FILE)",
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    import os

    from streamproc.config import Settings
    from streamproc.review.label_files.importer import read_token, run_import
    from streamproc.wiring import label_import_options

    token: str | None
    if args.token_file is not None:
        try:
            token = read_token(args.token_file)
        except ValueError as exc:
            print(f"streamproc review import: {exc}", file=sys.stderr)
            return 2
    else:
        token = os.environ.get(TOKEN_ENV, "").strip() or None
    return run_import(
        label_import_options(Settings()),
        args.file,
        args.format,
        reviewer=args.reviewer,
        tenant=args.tenant,
        token=token,
    )


def _export(args: argparse.Namespace) -> int:
    from streamproc.config import Settings
    from streamproc.review.label_files.exporter import run_export
    from streamproc.wiring import label_export_options

    return run_export(label_export_options(Settings()), args.output)


def _settings(args: argparse.Namespace) -> Settings:
    from streamproc.config import Settings

    return Settings().overriding(
        "review",
        host=args.host,
        port=args.port,
        store_url=args.store,
        tokens_file=args.tokens_file,
    )


def _serve(args: argparse.Namespace) -> int:
    from streamproc.review.page.auth import TokensFileError, reviewers_for
    from streamproc.review.page.tls import ReviewTlsError, tls_context
    from streamproc.telemetry.logging import configure_logging

    settings = _settings(args)
    configure_logging(settings.log_level, json_logs=settings.log_json)
    try:
        reviewers = reviewers_for(settings.review)
    except TokensFileError as exc:
        print(f"streamproc review serve: {exc}", file=sys.stderr)
        return EXIT_BAD_TOKENS_FILE
    try:
        tls_context(settings.review)
    except ReviewTlsError as exc:
        print(f"streamproc review serve: {exc}", file=sys.stderr)
        return EXIT_BAD_TLS
    if reviewers is None:
        print(
            "streamproc review serve: no tokens file (STREAMPROC_REVIEW__TOKENS_FILE): "
            "the page will refuse every reviewer",
            file=sys.stderr,
        )

    scheme = "https" if settings.review.tls_cert is not None else "http"

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(
            settings,
            reviewers=reviewers,
            stop=stop,
            started=lambda port: print(
                f"review page on {scheme}://{settings.review.host}:{port}/", file=sys.stderr
            ),
        )

    asyncio.run(main())
    return 0


async def serve(
    settings: Settings,
    *,
    reviewers: Reviewers | None,
    stop: asyncio.Event,
    started: Callable[[int], None] | None = None,
) -> None:
    """Run the page until ``stop`` is set: the queue intake, the label publisher and the
    HTTP server; ``started`` is told the port once it listens."""
    from streamproc.kafka.topics import AUDIT_MAX_MESSAGE_BYTES, ensure_topics, review_topic_specs
    from streamproc.review.page.intake import ReviewIntake
    from streamproc.review.page.publisher import KafkaLabelPublisher
    from streamproc.review.page.queue_store import ReviewQueueStore
    from streamproc.review.page.server import ReviewServer, build_app
    from streamproc.review.page.sessions import SessionBook
    from streamproc.review.page.tls import tls_context
    from streamproc.web.limits import HttpLimits
    from streamproc.wiring import kafka_connection, output_topics, topic_layout, topic_names

    review = settings.review
    ours = {review.queue_topic, review.labels_topic}
    await ensure_topics(
        settings.bootstrap_servers,
        [spec for spec in review_topic_specs(topic_layout(settings)) if spec.name in ours],
        settings.security,
    )
    store = ReviewQueueStore(
        review.store_url,
        labels_per_item=review.labels_per_item,
        second_label_share=review.second_label_share,
        seed=review.seed,
    )
    connection = kafka_connection(settings)
    publisher = KafkaLabelPublisher(connection, output_topics(settings).labels.record)
    await publisher.start()
    server: ReviewServer | None = None
    try:
        intake = ReviewIntake(
            store, connection, topic_names(settings), max_fetch_bytes=AUDIT_MAX_MESSAGE_BYTES
        )
        app = build_app(
            store=store,
            reviewers=reviewers,
            publish=publisher,
            intake=intake,
            secure_cookies=review.secure_cookies,
            trust_forwarded_proto=review.trust_forwarded_proto,
            sessions=SessionBook(max_age_s=review.session_max_age_s),
            show_judge_verdict=review.show_judge_verdict,
        )
        server = ReviewServer(
            app,
            host=review.host,
            port=review.port,
            ssl_context=tls_context(review),
            limits=HttpLimits.from_settings(review.http),
        )
        await server.start()
        assert server.port is not None
        if started is not None:
            started(server.port)
        await stop.wait()
    finally:
        if server is not None:
            await server.stop()
        await publisher.stop()
        store.close()
