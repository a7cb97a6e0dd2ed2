"""Reviewer tokens: who may open the review page, and which tenants' answers they see.

The tokens file (``settings.review.tokens_file``) is TOML, one ``[[reviewer]]`` table
each::

    [[reviewer]]
    name = "alice"
    tenants = ["acme", "globex"]
    token_sha256 = "9f86d081884c7d65..."

Only the sha256 of a token is stored, so a copy of the file lets nobody in; a token is
shown once, by ``streamproc review token``. The labels loop uses the same file to refuse a
label from a reviewer for a tenant it may not see (:func:`reviewers_for`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if TYPE_CHECKING:
    from streamproc.config import Settings

__all__ = [
    "Reviewer",
    "Reviewers",
    "TokensFileError",
    "hash_token",
    "new_token",
    "reviewers_for",
    "token_stanza",
]

_TOKEN_BYTES = 32


class TokensFileError(ValueError):
    """The tokens file is missing, not TOML, or a reviewer in it is malformed."""


@dataclass(frozen=True, slots=True)
class Reviewer:
    """One person (or program) allowed to label: a name and the tenants it may see."""

    name: str
    tenants: frozenset[str]
    token_sha256: str

    def may_see(self, tenant: str) -> bool:
        return tenant in self.tenants


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


class Reviewers:
    """The reviewers of one deployment, looked up by token."""

    def __init__(self, reviewers: Iterable[Reviewer]) -> None:
        self._reviewers: tuple[Reviewer, ...] = tuple(reviewers)
        names = [r.name for r in self._reviewers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise TokensFileError(f"reviewer named twice: {', '.join(twice)}")
        self._by_name = {r.name: r for r in self._reviewers}

    @classmethod
    def load(cls, path: Path) -> Reviewers:
        """Read a tokens file; :class:`TokensFileError` names what is wrong (never a hash)."""
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TokensFileError(f"cannot read the tokens file {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise TokensFileError(f"the tokens file {path} is not TOML: {exc}") from None
        unknown = sorted(set(document) - {"reviewer"})
        if unknown:
            raise TokensFileError(f"{path}: unknown tables {unknown} (expected [[reviewer]])")
        entries = document.get("reviewer", [])
        if not isinstance(entries, list):
            raise TokensFileError(f"{path}: 'reviewer' must be an array of tables [[reviewer]]")
        reviewers = []
        for number, entry in enumerate(entries, start=1):
            try:
                parsed = _Entry.model_validate(entry)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in error['loc']) or 'entry'}: {error['msg']}"
                    for error in exc.errors(include_input=False)
                )
                raise TokensFileError(f"{path}: reviewer #{number}: {problems}") from None
            reviewers.append(
                Reviewer(parsed.name, frozenset(parsed.tenants), parsed.token_sha256.lower())
            )
        return cls(reviewers)

    def authenticate(self, token: str) -> Reviewer | None:
        """The reviewer holding ``token``, or None. Every stored hash is compared, in
        constant time each, so the answer's timing does not tell which one was close."""
        if not token:
            return None
        presented = hash_token(token)
        found = None
        for reviewer in self._reviewers:
            if hmac.compare_digest(presented, reviewer.token_sha256):
                found = reviewer
        return found

    def by_name(self, name: str) -> Reviewer | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[Reviewer]:
        return iter(self._reviewers)

    def __len__(self) -> int:
        return len(self._reviewers)


def reviewers_for(settings: Settings) -> Reviewers | None:
    """The deployment's reviewers, or None when ``settings.review.tokens_file`` is unset
    (then the page refuses everyone, and labels are not checked by tenant)."""
    path = settings.review.tokens_file
    return None if path is None else Reviewers.load(path)


def hash_token(token: str) -> str:
    """What the tokens file keeps of a token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(_TOKEN_BYTES)


def token_stanza(name: str, tenants: Sequence[str], token: str) -> str:
    """The ``[[reviewer]]`` table to add to the tokens file for ``token``."""
    # JSON strings are valid TOML basic strings: quotes and backslashes come out escaped.
    listed = ", ".join(json.dumps(tenant, ensure_ascii=False) for tenant in tenants)
    return (
        "[[reviewer]]\n"
        f"name = {json.dumps(name, ensure_ascii=False)}\n"
        f"tenants = [{listed}]\n"
        f'token_sha256 = "{hash_token(token)}"\n'
    )
