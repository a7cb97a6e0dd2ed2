"""``docs/reference/settings.md``: every ``STREAMPROC_*`` variable with its type, default and
meaning, from the settings model (the rows ``streamproc settings`` prints)."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

from streamproc.cli._markdown import GENERATED, anchor, code, md_cell
from streamproc.cli.settings import SettingRow, setting_rows
from streamproc.config import NOT_SETTINGS, setting_variables

__all__ = ["render_settings_page"]


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    """``STREAMPROC_JUDGE__INFERENCE``; empty for the variables outside any group."""
    about: str
    rows: list[SettingRow]


def _groups() -> list[_Group]:
    """The variables by their innermost group, in the model's order."""
    rows = {row.name: row for row in setting_rows()}
    groups: dict[str, _Group] = {"": _Group("", "", [])}
    for each in setting_variables():
        if each.kind == "group":
            groups[each.name] = _Group(each.name, _group_about(each.field), [])
            continue
        parent = each.name.rsplit("__", 1)[0] if "__" in each.name else ""
        groups[parent].rows.append(rows[each.name])
    return [group for group in groups.values() if group.rows]


def _group_about(field: Any) -> str:
    """A group's first paragraph: its field's description, else its model's docstring,
    with fields named as variables where they are (``gate.policies``)."""
    model = field.annotation
    text = field.description or inspect.getdoc(model) or ""
    first = " ".join(text.split("\n\n")[0].split())
    return re.sub(r"``([^`]+)``", r"`\1`", first)


def render_settings_page() -> str:
    """``docs/reference/settings.md``."""
    groups = _groups()
    lines = [
        "# Settings",
        "",
        GENERATED.format(source="the settings model (streamproc/config.py)"),
        "",
        "Every `STREAMPROC_*` environment variable streamproc reads, with its type, default "
        "and meaning. A group (`STREAMPROC_WORKER`) can also be set as one JSON object; its "
        "fields are `STREAMPROC_WORKER__<FIELD>`. A list or a mapping is one JSON value. An "
        "unknown `STREAMPROC_*` variable is refused at start-up, with the closest name. "
        "`streamproc settings [GROUP]` prints the same list in a terminal.",
        "",
    ]
    for group in groups:
        title = _title(group)
        lines.append(f"- [{title}](#{anchor(title)})")
    lines.append(f"- [Not settings](#{anchor('Not settings')})")
    for group in groups:
        depth = "##" if group.name.count("__") == 0 else "###"
        lines += ["", f"{depth} {_title(group)}", ""]
        if group.about:
            lines += [md_cell(group.about), ""]
        lines += ["| Variable | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
        for row in group.rows:
            cells = [code(row.name), code(row.type), code(row.default), row.meaning]
            lines.append("| " + " | ".join(md_cell(cell) for cell in cells) + " |")
    lines += [
        "",
        "## Not settings",
        "",
        "Read on their own by one command or a developer script, so an environment that "
        "sets them is not refused:",
        "",
        *(f"- {code(name)}" for name in sorted(NOT_SETTINGS)),
    ]
    return "\n".join(lines) + "\n"


def _title(group: _Group) -> str:
    return code(f"{group.name}__*") if group.name else "General"
