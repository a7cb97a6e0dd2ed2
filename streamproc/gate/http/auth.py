"""Caller tokens: who may ask the gate for a decision, and for which tenants' answers.

The tokens file (``gate.tokens_file``) is TOML, one ``[[caller]]`` table each
(:mod:`streamproc.web.token_file`)::

    [[caller]]
    name = "assistant-eu"
    tenants = ["acme"]
    token_sha256 = "9f86d081884c7d65..."

A caller may check only answers whose ``tenant`` it names: a token of one tenant cannot
read (or spend the judge on) another's verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamproc.web import token_file
from streamproc.web.token_file import TokenBook, TokenHolder

if TYPE_CHECKING:
    from streamproc.gate.options import GateSettings

__all__ = ["Caller", "Callers", "caller_stanza", "callers_for"]

_TABLE = "caller"


@dataclass(frozen=True, slots=True)
class Caller(TokenHolder):
    """One program allowed to call the gate: a name and the tenants it may check."""


class Callers(TokenBook[Caller]):
    """The gate's callers, looked up by token."""

    table = _TABLE

    @classmethod
    def _holder(cls, entry: TokenHolder) -> Caller:
        return Caller(entry.name, entry.tenants, entry.token_sha256)


def callers_for(gate: GateSettings) -> Callers | None:
    """The gate's callers, or None when ``gate.tokens_file`` is unset (then every request
    is refused: a gate without tokens is never open)."""
    path = gate.tokens_file
    return None if path is None else Callers.load(path)


def caller_stanza(name: str, tenants: Sequence[str], token: str) -> str:
    """The ``[[caller]]`` table to add to the gate's tokens file for ``token``."""
    return token_file.token_stanza(_TABLE, name, tenants, token)
