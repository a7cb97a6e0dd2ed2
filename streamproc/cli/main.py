"""The ``streamproc`` command. Configures logging once, then hands over to one subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from streamproc.config import UnknownVariablesError, setting_variables
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
    "settings_error_lines",
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


_REPO_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


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
    except UnknownVariablesError as exc:
        for unknown in exc.unknown:
            print(f"streamproc: configuration error: {unknown}", file=sys.stderr)
        return EXIT_CONFIGURATION
    except ValidationError as exc:
        for line in settings_error_lines(exc):
            print(f"streamproc: configuration error: {line}", file=sys.stderr)
        return EXIT_CONFIGURATION
    except LifecycleError as exc:
        print(f"streamproc: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return result or 0


def explain_settings_error(exc: ValidationError) -> str:
    """All wrong settings on one line (see ``settings_error_lines``)."""
    return "; ".join(settings_error_lines(exc))


def settings_error_lines(exc: ValidationError) -> list[str]:
    """One line per wrong setting, named as the environment variable that sets it, never
    the Python path: "STREAMPROC_JUDGE__RECORDS: unknown locale 'xx' (e.g. en_US, de_DE)".
    A place inside a JSON value follows the variable: "STREAMPROC_GATE__POLICIES (at 0.tenant)".
    The value itself is left out: it may be a secret."""
    names = {each.name for each in setting_variables()}
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        depth = len(loc)
        while depth and "STREAMPROC_" + "__".join(loc[:depth]).upper() not in names:
            depth -= 1
        name = "STREAMPROC_" + "__".join(loc[:depth]).upper() if depth else "STREAMPROC_*"
        inside = f" (at {'.'.join(loc[depth:])})" if loc[depth:] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{name}{inside}: {message}")
    return lines


def _parser() -> argparse.ArgumentParser:
    from streamproc.cli.settings import register as register_settings
    from streamproc.cli.settings import settings_epilog

    parser = argparse.ArgumentParser(
        prog="streamproc",
        description="Streaming groundedness monitor for LLM assistants.",
        epilog=settings_epilog(),
    )
    parser.add_argument("--version", action="version", version=f"streamproc {_version()}")
    commands = parser.add_subparsers(metavar="COMMAND")

    worker = commands.add_parser(
        "worker",
        help="run a stream worker (settings: STREAMPROC_*)",
        description="Judge the answers topic and publish verdicts, windows and alerts until "
        "SIGTERM/SIGINT.",
        epilog=settings_epilog(
            "worker", "judge", "window", "alerts", "topics", "audit", "review", "labels"
        ),
    )
    worker.set_defaults(func=_worker)

    demo = commands.add_parser(
        "demo", help="embedded broker + worker + sample answers; prints verdicts and windows"
    )
    demo.add_argument("--timeout", type=float, default=180.0, help="give up after (s)")
    demo.set_defaults(func=_demo)

    schemas = commands.add_parser("schemas", help="write or check the JSON Schema files")
    schemas.add_argument("action", choices=["write", "check"])
    schemas.add_argument(
        "--output",
        "-o",
        dest="dir",
        type=Path,
        metavar="DIR",
        default=_REPO_SCHEMAS,
        help="the folder written or checked (default: the repository's schemas/)",
    )
    schemas.set_defaults(func=_schemas)

    from streamproc.cli.evaluate import register

    register(commands)
    register_settings(commands)  # settings [GROUP]

    from streamproc.cli.reference import register as register_docs

    register_docs(commands)  # docs write | check

    from streamproc.cli.audit import register as register_audit

    register_audit(commands)  # audit show | find | export | verify | purge, and audit-sink

    from streamproc.cli.review import register as register_review

    review = register_review(commands)  # review serve | token | import | export

    from streamproc.cli.gate import register as register_gate

    gate = register_gate(commands)  # gate serve | token

    from streamproc.cli.rules import register as register_rules

    register_rules(commands)  # rules write | check

    # Each long-running command's --help says which variables configure it.
    commands.choices["audit-sink"].epilog = settings_epilog("audit")
    review.choices["serve"].epilog = settings_epilog("review")
    gate.choices["serve"].epilog = settings_epilog("gate")
    return parser


def _version() -> str:
    """The installed distribution's version; the package's own where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamproc")
    except PackageNotFoundError:
        from streamproc import __version__

        return __version__


def _worker(args: argparse.Namespace) -> int:
    from streamproc.cli.worker import run_worker
    from streamproc.config import Settings
    from streamproc.telemetry.logging import configure_logging

    settings = Settings()
    configure_logging(
        settings.log_level, json_logs=settings.log_json, log_texts=settings.audit.log_texts
    )
    run_worker(settings)


def _demo(args: argparse.Namespace) -> int:
    import os

    from streamproc.cli.demo import run_demo
    from streamproc.config import unknown_setting_variables

    unknown = unknown_setting_variables(os.environ)  # before the demo starts its broker
    if unknown:
        raise UnknownVariablesError(unknown)

    return run_demo(timeout_s=args.timeout)


def _schemas(args: argparse.Namespace) -> int:
    from streamproc.config import Settings
    from streamproc.contracts.schema_files import drifted_schemas, write_schemas
    from streamproc.wiring import gate_api_defaults, topic_names

    # The documents show the settings' defaults, never the environment's STREAMPROC_*.
    defaults = Settings.model_construct()
    names, gate = topic_names(defaults), gate_api_defaults(defaults)
    if args.action == "write":
        for path in write_schemas(args.dir, names, gate):
            print(f"wrote {path}")
        return 0
    drifted = drifted_schemas(args.dir, names, gate)
    if drifted:
        print("out of date: " + ", ".join(drifted) + " (run: streamproc schemas write)")
        return 1
    print(f"schemas in {args.dir} match the models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
