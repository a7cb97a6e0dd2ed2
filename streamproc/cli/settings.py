"""``streamproc settings [GROUP]``: every ``STREAMPROC_*`` variable with its type, default and
meaning, read from the settings model itself, so an installed wheel documents its own
configuration; and the help epilog that points each server's ``--help`` at it."""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from streamproc._env_names import Variable
from streamproc.config import NOT_SETTINGS, setting_variables

__all__ = ["SettingRow", "register", "setting_rows", "settings_epilog", "settings_table"]

PREFIX = "STREAMPROC_"
REFERENCE_PAGE = "docs/reference/settings.md"


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
    command.add_argument(
        "--markdown",
        action="store_true",
        help=f"print the whole list as the reference page ({REFERENCE_PAGE})",
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
        f"default and meaning ('streamproc settings {first}' one group; also "
        f"{REFERENCE_PAGE}); a misspelt {PREFIX}* name is refused."
    )


@dataclass(frozen=True, slots=True)
class SettingRow:
    """One variable as ``streamproc settings`` and the reference page show it."""

    name: str
    type: str
    default: str
    meaning: str


def setting_rows(group: str | None = None) -> list[SettingRow]:
    """Every variable that takes a value (groups left out), the variables of ``group``
    only if given."""
    wanted = f"{PREFIX}{group.upper()}__" if group else PREFIX
    variables = setting_variables()
    names = {each.name for each in variables}
    return [
        SettingRow(
            each.name,
            _type_name(each.field.annotation),
            _default(each),
            _meaning(each, names),
        )
        for each in variables
        if each.kind != "group" and each.name.startswith(wanted)
    ]


def settings_table(group: str | None = None) -> list[str]:
    """``NAME (TYPE, default X)`` and an indented meaning per variable, the variables of
    ``group`` only if given."""
    lines = []
    for row in setting_rows(group):
        lines.append(f"{row.name} ({row.type}, default {row.default})")
        if row.meaning:
            lines.append(f"    {row.meaning}")
    return lines


def _settings(args: argparse.Namespace) -> int:
    if args.markdown:
        from streamproc.cli.reference import render_settings_page

        print(render_settings_page(), end="")
        return 0
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


_MODULE_PATH = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*)")
"""``typing.``, ``pathlib.``, ``streamproc.monitor.options.`` before a type's name."""


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if get_origin(annotation) is not None:  # Literal, tuple, dict: as written, less modules
        return _MODULE_PATH.sub("", str(annotation))
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
    if value is None:
        return "-"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, list | tuple | dict):  # set as one JSON value
        return json.dumps(_jsonable(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return '""'
    return str(getattr(value, "value", value))


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_jsonable(each) for each in value]
    if isinstance(value, dict):
        return {key: _jsonable(each) for key, each in value.items()}
    return value


_REFERENCE = re.compile(
    r"``([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)``"  # ``late_topic``, ``topics.aggregates``
    r"|(?<![\w`.])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w`])"  # a bare snake_case name
)
"""A field named in a description the Python way."""


def _meaning(variable: Variable, names: set[str]) -> str:
    """The field's description on one line, a field it names (``late_topic``,
    ``topics.aggregates``; a bare ``tls_cert`` of its own group only) named as its
    variable (a sibling first, then from the top)."""
    text = " ".join((variable.field.description or "").split())
    group = variable.name.removeprefix(PREFIX).split("__")[:-1]

    def as_variable(match: re.Match[str]) -> str:
        quoted, bare = match.group(1), match.group(2)
        if bare is not None:
            sibling = PREFIX + "__".join([*group, bare.upper()])
            return f"`{sibling}`" if sibling in names else bare
        field = quoted.replace(".", "__").upper()
        parts = list(group)
        while True:
            candidate = PREFIX + "__".join([*parts, field])
            if candidate in names:
                return f"`{candidate}`"
            if not parts:
                return f"`{quoted}`"
            parts.pop()

    return _REFERENCE.sub(as_variable, text)
