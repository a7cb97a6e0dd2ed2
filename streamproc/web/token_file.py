"""Bearer-token files: who may call, and which tenants' answers each holder may touch.

The review page (``[[reviewer]]``) and the gate (``[[caller]]``) read the same TOML
shape, one table per holder::

    [[caller]]
    name = "assistant-eu"
    tenants = ["acme", "globex"]
    token_sha256 = "9f86d081884c7d65..."

Only the sha256 of a token is stored, so a copy of the file lets nobody in; a token is
shown once, when it is made (:func:`new_token`, :func:`token_stanza`). A lookup compares
the presented token's hash with every stored one in constant time each
(:func:`authenticate`), so the time taken does not tell which one was close.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "TokenBook",
    "TokenHolder",
    "TokensFileError",
    "authenticate",
    "hash_token",
    "new_token",
    "print_new_token",
    "read_holders",
    "token_stanza",
]

_TOKEN_BYTES = 32


class TokensFileError(ValueError):
    """The tokens file is missing, not TOML, or an entry in it is malformed."""


@dataclass(frozen=True, slots=True)
class TokenHolder:
    """One person or program holding a token: a name and the tenants it may see."""

    name: str
    tenants: frozenset[str]
    token_sha256: str
    """Lower-case hex; the token itself is never kept."""

    def may_see(self, tenant: str) -> bool:
        return tenant in self.tenants


H = TypeVar("H", bound=TokenHolder)


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    tenants: list[str] = Field(min_length=1)
    token_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")

    @field_validator("tenants")
    @classmethod
    def _no_empty_tenant(cls, tenants: list[str]) -> list[str]:
        if any(not tenant for tenant in tenants):
            raise ValueError("a tenant name is empty")
        return tenants


def read_holders(path: Path, table: str) -> list[TokenHolder]:
    """The ``[[table]]`` entries of the file at ``path``, validated; :class:`TokensFileError`
    names what is wrong (never a hash)."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokensFileError(f"cannot read the tokens file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TokensFileError(f"the tokens file {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TokensFileError(f"the tokens file {path} is not TOML: {exc}") from None
    unknown = sorted(set(document) - {table})
    if unknown:
        raise TokensFileError(f"{path}: unknown tables {unknown} (expected [[{table}]])")
    entries = document.get(table, [])
    if not isinstance(entries, list):
        raise TokensFileError(f"{path}: '{table}' must be an array of tables [[{table}]]")
    holders = []
    for number, entry in enumerate(entries, start=1):
        try:
            parsed = _Entry.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'entry'}: {error['msg']}"
                for error in exc.errors(include_input=False)
            )
            raise TokensFileError(f"{path}: {table} #{number}: {problems}") from None
        holders.append(
            TokenHolder(parsed.name, frozenset(parsed.tenants), parsed.token_sha256.lower())
        )
    return holders


def authenticate(token: str, holders: Iterable[H]) -> H | None:
    """The holder of ``token``, or None. Every stored hash is compared, in constant time
    each, and the loop never stops early, so the timing does not tell which was close."""
    if not token:
        return None
    presented = hash_token(token)
    found = None
    for holder in holders:
        if hmac.compare_digest(presented, holder.token_sha256):
            found = holder
    return found


class TokenBook(Generic[H]):
    """The holders of one tokens file, looked up by token; a subclass names its table and
    its holder type (:meth:`_holder`)."""

    table: ClassVar[str] = "token"

    def __init__(self, holders: Iterable[H]) -> None:
        self._holders: tuple[H, ...] = tuple(holders)
        names = [h.name for h in self._holders]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise TokensFileError(f"{self.table} named twice: {', '.join(twice)}")
        self._by_name = {h.name: h for h in self._holders}

    @classmethod
    def _holder(cls, entry: TokenHolder) -> H:
        raise NotImplementedError

    @classmethod
    def load(cls, path: Path) -> Self:
        """Read a tokens file; :class:`TokensFileError` names what is wrong."""
        return cls(cls._holder(entry) for entry in read_holders(path, cls.table))

    def authenticate(self, token: str) -> H | None:
        """The holder of ``token``, or None (see :func:`authenticate`)."""
        return authenticate(token, self._holders)

    def by_name(self, name: str) -> H | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[H]:
        return iter(self._holders)

    def __len__(self) -> int:
        return len(self._holders)


def hash_token(token: str) -> str:
    """What a tokens file keeps of a token: its sha256, hex. Any string hashes (a header
    with a stray surrogate is just a token that matches nothing)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(_TOKEN_BYTES)


def print_new_token(
    table: str, name: str, tenants: Sequence[str], *, holder: str, tokens_file: str
) -> None:
    """What a ``token`` command prints: a fresh token alone on stdout's first line, then
    the ``[[table]]`` entry to add to ``tokens_file``, and on stderr that the token is
    shown only now (so ``TOKEN=$(... 2>/dev/null | head -1)`` takes it)."""
    token = new_token()
    print(token)
    print(
        f"\n# Give the token above to the {holder} (it is shown only now), and add this to\n"
        f"# {tokens_file}; it keeps only the token's hash:",
        file=sys.stderr,
    )
    print(token_stanza(table, name, tenants, token), end="")


def token_stanza(table: str, name: str, tenants: Sequence[str], token: str) -> str:
    """The ``[[table]]`` entry to add to a tokens file for ``token``."""
    # JSON strings are valid TOML basic strings: quotes and backslashes come out escaped.
    listed = ", ".join(json.dumps(tenant, ensure_ascii=False) for tenant in tenants)
    return (
        f"[[{table}]]\n"
        f"name = {json.dumps(name, ensure_ascii=False)}\n"
        f"tenants = [{listed}]\n"
        f'token_sha256 = "{hash_token(token)}"\n'
    )
