"""``streamproc docs write|check``: the reference pages under ``docs/reference/``, generated
from the code so they cannot drift from it.

- ``settings.md``: every ``STREAMPROC_*`` variable with its type, default and meaning, from
  the settings model (the rows ``streamproc settings`` prints).
- ``topics.md``: every topic streamproc reads or writes, from the topic catalog
  (:mod:`streamproc.kafka.topics`): its name and the variable that sets it, its key and
  value (:class:`~streamproc.verdicts.catalog.OutputTopics`, and the AsyncAPI contract for
  what streamproc only reads), its partitions and configuration, and who writes and reads
  it (:data:`_FLOWS`, the one part written by hand: a topic missing there fails the
  generator, and so the page's test).

Which variable sets a topic's name or a configuration value is found by changing each
variable in turn and seeing what moves, so a new topic setting needs no table here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from streamproc.cli._settings_page import render_settings_page
from streamproc.cli._topics_page import render_topics_page

__all__ = [
    "REFERENCE_DIR",
    "register",
    "render_reference",
    "render_settings_page",
    "render_topics_page",
    "stale_pages",
    "write_reference",
]

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "docs" / "reference"
"""``docs/reference`` of the repository this module is in."""


# ----------------------------------------------------------------------------- commands


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``docs`` command."""
    command = subparsers.add_parser(
        "docs",
        help="write or check the reference pages (docs/reference/*.md) generated from the code",
        description="The reference pages generated from the settings model and the topic "
        "catalog: settings.md (every STREAMPROC_* variable) and topics.md (every topic, its "
        "key, value, configuration, writers and readers). 'check' exits 1 naming each page "
        "that differs from what 'write' would write.",
    )
    command.add_argument("action", choices=["write", "check"])
    command.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="DIR",
        default=REFERENCE_DIR,
        help="the folder of the pages (default: the repository's docs/reference)",
    )
    command.set_defaults(func=_docs)


def _docs(args: argparse.Namespace) -> int:
    folder: Path = args.output
    if args.action == "write":
        for path in write_reference(folder):
            print(f"wrote {path}")
        return 0
    stale = stale_pages(folder)
    for name in stale:
        print(f"{folder / name} is out of date (run: streamproc docs write)")
    if stale:
        return 1
    print(f"{', '.join(render_reference())} in {folder} match the code")
    return 0


def render_reference() -> dict[str, str]:
    """File name -> page text, exactly as checked in."""
    return {"settings.md": render_settings_page(), "topics.md": render_topics_page()}


def write_reference(folder: Path) -> list[Path]:
    """Write every page; return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_reference().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale_pages(folder: Path) -> list[str]:
    """Names of the pages missing from ``folder`` or different from the code's."""
    return [
        name
        for name, text in render_reference().items()
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text
    ]
