"""The environment variable names a pydantic-settings model answers to, and the ones it does not.

pydantic-settings silently ignores an unknown top-level variable (``STREAMPROC_BROKR_URL``), so
a typo leaves a default in place without a word. This module knows nothing of streamproc's
settings: it walks any model, so ``config.py`` can refuse what no field answers to.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["UnknownVariable", "UnknownVariablesError", "Variable", "unknown_variables", "variables"]


@dataclass(frozen=True)
class Variable:
    """One name a model reads: a value, a group (set as one JSON object, or field by field
    below it) or a free-form mapping (JSON, or key by key below it)."""

    name: str
    field: FieldInfo
    kind: str  # "value" | "group" | "mapping"


@dataclass(frozen=True)
class UnknownVariable:
    """A variable no field answers to, and the closest name that one does (if any is close)."""

    name: str
    suggestion: str | None

    def __str__(self) -> str:
        hint = f"did you mean {self.suggestion}?" if self.suggestion else "no setting is close"
        return f"{self.name} is not a setting ({hint})"


class UnknownVariablesError(Exception):
    """Variables with the settings' prefix that name no setting.

    Not a ``ValueError`` on purpose: raised from a model validator, it reaches the caller
    as itself instead of being folded into a ``ValidationError``."""

    def __init__(self, unknown: list[UnknownVariable]) -> None:
        super().__init__("; ".join(str(each) for each in unknown))
        self.unknown = unknown


def variables(model: type[BaseModel], prefix: str, delimiter: str = "__") -> Iterator[Variable]:
    """Every variable name ``model`` reads, parents before their fields."""
    for name, field in model.model_fields.items():
        full = f"{prefix}{name.upper()}"
        group = _group(field.annotation)
        if group is not None:
            yield Variable(full, field, "group")
            yield from variables(group, f"{full}{delimiter}", delimiter)
        elif get_origin(field.annotation) is dict:
            yield Variable(full, field, "mapping")
        else:
            yield Variable(full, field, "value")


def unknown_variables(
    model: type[BaseModel],
    environ: Mapping[str, str],
    prefix: str,
    not_settings: Collection[str] = (),
    delimiter: str = "__",
) -> list[UnknownVariable]:
    """The names in ``environ`` that carry ``prefix`` (in any case, as pydantic-settings reads
    them) yet name no field of ``model`` and are not in ``not_settings``."""
    known = list(variables(model, prefix, delimiter))
    names = {each.name for each in known}
    free_form = tuple(f"{each.name}{delimiter}" for each in known if each.kind == "mapping")
    allowed = {name.upper() for name in not_settings}
    unknown = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(prefix) or upper in names or upper in allowed:
            continue
        if upper.startswith(free_form):
            continue
        unknown.append(UnknownVariable(name, _closest(upper, names, prefix)))
    return unknown


def _closest(name: str, names: Collection[str], prefix: str) -> str | None:
    """Compared without the shared prefix, which would make every name look alike."""
    tails = {each.removeprefix(prefix): each for each in names}
    match = difflib.get_close_matches(name.removeprefix(prefix), list(tails), n=1, cutoff=0.6)
    return tails[match[0]] if match else None


def _group(annotation: Any) -> type[BaseModel] | None:
    """The model of a nested group: ``Group`` or ``Group | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None
