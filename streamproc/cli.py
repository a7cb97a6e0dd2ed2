"""The ``streamproc`` command. Configures logging once, then hands over to one subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from streamproc.inference.manifest import ManifestError
from streamproc.inference.registry import (
    MissingExtraError,
    ModelIntegrityError,
    ModelSourceError,
    UnknownModelError,
    default_models_dir,
)
from streamproc.judge.decision.calibrator import CalibratorError
from streamproc.judge.records.lifecycles import LifecycleError

__all__ = [
    "EXIT_CONFIGURATION",
    "EXIT_MODEL_MISSING",
    "explain_model_error",
    "explain_settings_error",
    "main",
]

EXIT_MODEL_MISSING = 2
EXIT_CONFIGURATION = 2
MODEL_ERRORS = (
    UnknownModelError,
    ModelSourceError,
    ModelIntegrityError,
    ManifestError,
    CalibratorError,
)


def explain_model_error(exc: Exception) -> str:
    """One line: what is missing or wrong, and where the models are looked for (a model
    that an extra brings needs only the extra's name)."""
    if isinstance(exc, MissingExtraError):
        return f"the judge's models cannot be loaded: {exc}"
    return (
        f"the judge's models cannot be loaded: {exc}. Models are read from "
        f"STREAMPROC_JUDGE__INFERENCE__MODELS_DIR (default {default_models_dir()}): point it "
        "at a folder of model manifests such as the repository's models/, or choose another "
        "model (STREAMPROC_JUDGE__INFERENCE__NLI_MODEL, ...) or judge "
        "(STREAMPROC_JUDGE__NAME=rules needs no model)."
    )


_REPO_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        result: int | None = args.func(args)
    except MODEL_ERRORS as exc:
        print(f"streamproc: {explain_model_error(exc)}", file=sys.stderr)
        return EXIT_MODEL_MISSING
    except ValidationError as exc:
        print(f"streamproc: configuration error: {explain_settings_error(exc)}", file=sys.stderr)
        return EXIT_CONFIGURATION
    except LifecycleError as exc:
        print(f"streamproc: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return result or 0


def explain_settings_error(exc: ValidationError) -> str:
    """One line per wrong setting, named as the environment variable that sets it:
    "STREAMPROC_JUDGE__RECORDS: unknown locale 'xx' (e.g. en_US, de_DE)"."""
    parts = []
    for error in exc.errors():
        name = "STREAMPROC_" + "__".join(str(p) for p in error["loc"]).upper()
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{name}: {message}")
    return "; ".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamproc", description="Streaming groundedness monitor for LLM assistants."
    )
    commands = parser.add_subparsers(metavar="COMMAND")

    worker = commands.add_parser("worker", help="run a stream worker (settings: STREAMPROC_*)")
    worker.set_defaults(func=_worker)

    demo = commands.add_parser(
        "demo", help="embedded broker + worker + sample answers; prints verdicts and windows"
    )
    demo.add_argument("--timeout", type=float, default=180.0, help="give up after (s)")
    demo.set_defaults(func=_demo)

    schemas = commands.add_parser("schemas", help="write or check the JSON Schema files")
    schemas.add_argument("action", choices=["write", "check"])
    schemas.add_argument("--dir", type=Path, default=_REPO_SCHEMAS)
    schemas.set_defaults(func=_schemas)

    from streamproc.evaluate.cli import register

    register(commands)

    from streamproc.audit_cli import register as register_audit

    register_audit(commands)  # audit show | find | export | verify | purge, and audit-sink

    from streamproc.review_cli import register as register_review

    register_review(commands)  # review serve | token | import | export

    from streamproc.gate_cli import register as register_gate

    register_gate(commands)  # gate serve | token
    return parser


def _worker(args: argparse.Namespace) -> int:
    from streamproc.adapters.logging import configure_logging
    from streamproc.config import Settings
    from streamproc.worker import run_worker

    settings = Settings()
    configure_logging(
        settings.log_level, json_logs=settings.log_json, log_texts=settings.audit.log_texts
    )
    run_worker(settings)


def _demo(args: argparse.Namespace) -> int:
    from streamproc.demo import run_demo

    return run_demo(timeout_s=args.timeout)


def _schemas(args: argparse.Namespace) -> int:
    from streamproc.schema_files import drifted_schemas, write_schemas

    if args.action == "write":
        for path in write_schemas(args.dir):
            print(f"wrote {path}")
        return 0
    drifted = drifted_schemas(args.dir)
    if drifted:
        print("out of date: " + ", ".join(drifted) + " (run: streamproc schemas write)")
        return 1
    print(f"schemas in {args.dir} match the models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
