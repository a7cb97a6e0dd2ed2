"""Reviewer tokens: who may open the review page, and which tenants' answers they see.

The tokens file (``review.tokens_file``) is TOML, one ``[[reviewer]]`` table
each::

    [[reviewer]]
    name = "alice"
    tenants = ["acme", "globex"]
    token_sha256 = "9f86d081884c7d65..."

Only the sha256 of a token is stored, so a copy of the file lets nobody in; a token is
shown once, by ``streamproc review token``. The labels loop uses the same file to refuse a
label from a reviewer for a tenant it may not see (:func:`reviewers_for`). Reading and
checking the file is :mod:`streamproc.web.token_file`'s, shared with the gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamproc.web import token_file
from streamproc.web.token_file import TokenBook, TokenHolder, TokensFileError, hash_token

if TYPE_CHECKING:
    from streamproc.review.options import ReviewSettings

__all__ = [
    "Reviewer",
    "Reviewers",
    "TokensFileError",
    "hash_token",
    "new_token",
    "reviewers_for",
    "token_stanza",
]

new_token = token_file.new_token

_TABLE = "reviewer"


@dataclass(frozen=True, slots=True)
class Reviewer(TokenHolder):
    """One person (or program) allowed to label: a name and the tenants it may see."""


class Reviewers(TokenBook[Reviewer]):
    """The reviewers of one deployment, looked up by token."""

    table = _TABLE

    @classmethod
    def _holder(cls, entry: TokenHolder) -> Reviewer:
        return Reviewer(entry.name, entry.tenants, entry.token_sha256)


def reviewers_for(review: ReviewSettings) -> Reviewers | None:
    """The deployment's reviewers, or None when ``review.tokens_file`` is unset (then the
    page refuses everyone, and labels are not checked by tenant)."""
    path = review.tokens_file
    return None if path is None else Reviewers.load(path)


def token_stanza(name: str, tenants: Sequence[str], token: str) -> str:
    """The ``[[reviewer]]`` table to add to the tokens file for ``token``."""
    return token_file.token_stanza(_TABLE, name, tenants, token)
