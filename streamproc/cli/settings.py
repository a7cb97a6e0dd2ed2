"""``streamproc settings [GROUP]``: every ``STREAMPROC_*`` variable with its type, default and
meaning, read from the settings model itself, so an installed wheel documents its own
configuration; and the help epilog that points each server's ``--help`` at it."""

from __future__ import annotations

import argparse
import sys
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from streamproc._env_names import Variable
from streamproc.config import NOT_SETTINGS, setting_variables

__all__ = ["register", "settings_epilog", "settings_table"]

PREFIX = "STREAMPROC_"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add the ``settings`` command."""
    command = subparsers.add_parser(
        "settings",
        help="list every STREAMPROC_* variable with its type, default and meaning",
        description="Every STREAMPROC_* environment variable streamproc reads. A group "
        "(STREAMPROC_WORKER) can also be set as one JSON object; its fields are "
        "STREAMPROC_WORKER__<FIELD>. An unknown STREAMPROC_* variable is refused.",
    )
    command.add_argument(
        "group", nargs="?", help="only this group's variables (e.g. worker, gate, audit)"
    )
    command.set_defaults(func=_settings)


def settings_epilog(*groups: str) -> str:
    """One paragraph for a command's ``--help``: which variables configure it, and where
    the whole list is."""
    named = ", ".join(f"{PREFIX}{group.upper()}__*" for group in groups)
    also = f"{named}, " if named else ""
    first = groups[0] if groups else "worker"
    return (
        f"Settings are environment variables: {also}{PREFIX}BROKER_URL, {PREFIX}SECURITY__*, "
        f"{PREFIX}LOG_LEVEL, ... . 'streamproc settings' lists every one with its type, "
        f"default and meaning ('streamproc settings {first}' one group); a misspelt "
        f"{PREFIX}* name is refused."
    )


def settings_table(group: str | None = None) -> list[str]:
    """``NAME (TYPE, default X)`` and an indented meaning per variable, the variables of
    ``group`` only if given."""
    wanted = f"{PREFIX}{group.upper()}__" if group else PREFIX
    lines = []
    for each in setting_variables():
        if each.kind == "group" or not each.name.startswith(wanted):
            continue
        lines.append(f"{each.name} ({_type_name(each.field.annotation)}, default {_default(each)})")
        meaning = _meaning(each)
        if meaning:
            lines.append(f"    {meaning}")
    return lines


def _settings(args: argparse.Namespace) -> int:
    lines = settings_table(args.group)
    if not lines:
        groups = sorted(
            each.name.removeprefix(PREFIX).lower()
            for each in setting_variables()
            if each.kind == "group" and "__" not in each.name.removeprefix(PREFIX)
        )
        print(
            f"streamproc: no settings group {args.group!r}; groups: {', '.join(groups)}",
            file=sys.stderr,
        )
        return 2
    print("\n".join(lines))
    if args.group is None:
        print(f"\nNot settings, read on their own: {', '.join(sorted(NOT_SETTINGS))}")
    return 0


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if get_origin(annotation) is not None:  # Literal, tuple, dict: as written
        return str(annotation).replace("typing.", "").replace("streamproc.config.", "")
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def _default(variable: Variable) -> str:
    field = variable.field
    if field.default is PydanticUndefined:
        value = field.default_factory() if field.default_factory is not None else None  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None or value == () or value == {}:
        return "-"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(getattr(value, "value", value))


def _meaning(variable: Variable) -> str:
    return " ".join((variable.field.description or "").split())
