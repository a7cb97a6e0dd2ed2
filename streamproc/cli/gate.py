"""The inline gate's commands: ``streamproc gate serve`` (the gate, until SIGTERM/SIGINT:
:func:`streamproc.cli.gate_process.main`) and ``streamproc gate token`` (a new caller token
and the ``[[caller]]`` entry to add for it).

``gate serve`` checks the tokens file and the TLS settings before anything starts, so a
bad deployment exits at once with one line (code 2) instead of a traceback. Without
``settings.gate.tokens_file`` it still starts, but refuses every request (and says so).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamproc.config import Settings

__all__ = ["EXIT_BAD_SETTINGS", "register"]

EXIT_BAD_SETTINGS = 2
"""The tokens file or the TLS certificate and key cannot be read."""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the ``gate`` command; returns its actions, so other ``gate`` actions can be
    added to the same command."""
    gate = subparsers.add_parser("gate", help="the inline gate and its callers' tokens")
    actions = gate.add_subparsers(metavar="ACTION")

    serve = actions.add_parser(
        "serve",
        help="serve POST /v1/check (and the Kafka request topic) until SIGTERM/SIGINT "
        "(settings: STREAMPROC_GATE__*)",
    )
    serve.add_argument("--host", help="bind here (default: STREAMPROC_GATE__HOST)")
    serve.add_argument("--port", type=int, help="port (default: STREAMPROC_GATE__PORT)")
    serve.add_argument(
        "--tokens-file",
        type=Path,
        metavar="FILE",
        help="caller tokens (default: STREAMPROC_GATE__TOKENS_FILE)",
    )
    serve.set_defaults(func=_serve)

    token = actions.add_parser(
        "token", help="a new caller token, and the [[caller]] entry for the tokens file"
    )
    token.add_argument("--name", required=True, help="the caller's name (in the gate's logs)")
    token.add_argument(
        "--tenant",
        action="append",
        required=True,
        help="a tenant whose answers the caller may check (repeat for several)",
    )
    token.set_defaults(func=_token)

    def _gate_help(args: argparse.Namespace) -> int:
        gate.print_help()
        return 2

    gate.set_defaults(func=_gate_help)
    return actions


def _token(args: argparse.Namespace) -> int:
    from streamproc.gate.http.auth import Callers
    from streamproc.web.token_file import print_new_token

    print_new_token(
        Callers.table,
        args.name,
        args.tenant,
        holder="caller",
        tokens_file="the gate's tokens file (STREAMPROC_GATE__TOKENS_FILE)",
    )
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    from streamproc.config import Settings

    return Settings().overriding(
        "gate", host=args.host, port=args.port, tokens_file=args.tokens_file
    )


def _serve(args: argparse.Namespace) -> int:
    from streamproc.cli import gate_process
    from streamproc.gate.http.auth import callers_for
    from streamproc.gate.http.server import GateTlsError, tls_context
    from streamproc.telemetry.logging import configure_logging
    from streamproc.web.token_file import TokensFileError

    settings = _settings(args)
    configure_logging(
        settings.log_level, json_logs=settings.log_json, log_texts=settings.audit.log_texts
    )
    try:
        callers = callers_for(settings.gate)
        tls_context(settings.gate)
    except (TokensFileError, GateTlsError) as exc:
        print(f"streamproc gate serve: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    if callers is None:
        print(
            "streamproc gate serve: no tokens file (STREAMPROC_GATE__TOKENS_FILE): "
            "every request will be refused (401)",
            file=sys.stderr,
        )
    gate_process.main(settings)
