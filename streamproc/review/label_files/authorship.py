"""Whose labels an import publishes: a reviewer it can prove, or the import itself.

A label's ``reviewer`` is what the audit trail and the accuracy figures attribute it to,
so ``review import`` never takes a name from the file or the command line on trust:

- with a reviewer token that the tokens file (``review.tokens_file``, the one the
  review page uses) knows, every label is that reviewer's; a label naming another
  reviewer, or a tenant the reviewer may not see, stops the import before anything is sent;
- without a token, every label's reviewer is the import itself, ``import:<file name>``.
  The labels loop accepts labels only of reviewers in the tokens file, so such labels
  reach the topic (and ``review export``) but not the live accuracy; they are dead letters
  there, under their own name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from streamproc.contracts.label_events import LabelEvent
from streamproc.review.options import ReviewSettings
from streamproc.review.page.auth import Reviewer, TokensFileError, reviewers_for

__all__ = [
    "IMPORT_AUTHOR_PREFIX",
    "Authorship",
    "AuthorshipError",
    "authorship",
    "check_labels",
    "import_author",
    "read_token",
]

IMPORT_AUTHOR_PREFIX: Final = "import:"
_MAX_NAME: Final = 200
_MAX_TOKEN_BYTES: Final = 4096
_MAX_ERRORS: Final = 10


class AuthorshipError(ValueError):
    """The import cannot say whose its labels are; the message says why."""


@dataclass(frozen=True, slots=True)
class Authorship:
    """Either a proven ``reviewer`` (the labels are its) or an ``author`` standing for
    the import (every label is recorded as by it)."""

    reviewer: Reviewer | None
    author: str | None


def import_author(path: Path) -> str:
    """``import:<file name>``, cut to a label's 200-character reviewer field."""
    return f"{IMPORT_AUTHOR_PREFIX}{path.name}"[:_MAX_NAME]


def read_token(path: Path) -> str:
    """The reviewer token held in ``path`` (its first line); ValueError when unreadable."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_TOKEN_BYTES)
        token = raw.decode("utf-8").strip().splitlines()[0].strip() if raw.strip() else ""
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the token file {path}: {error}") from None
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token


def authorship(
    review: ReviewSettings, path: Path, *, token: str | None, claimed: str | None
) -> Authorship:
    """Whose the labels of ``path`` are. ``claimed`` (``--reviewer``) must be the
    token's reviewer, checked against ``review.tokens_file``; without a token no name is
    taken on trust."""
    if token is None:
        if claimed is not None:
            raise AuthorshipError(
                f"--reviewer {claimed!r} needs that reviewer's token (--token-file or "
                "STREAMPROC_REVIEWER_TOKEN): without one the labels are recorded as by "
                f"{import_author(path)!r}"
            )
        return Authorship(None, import_author(path))
    try:
        reviewers = reviewers_for(review)
    except TokensFileError as error:
        raise AuthorshipError(str(error)) from None
    if reviewers is None:
        raise AuthorshipError(
            "no tokens file to check the reviewer token against (STREAMPROC_REVIEW__TOKENS_FILE)"
        )
    reviewer = reviewers.authenticate(token)
    if reviewer is None:
        raise AuthorshipError("the reviewer token is not in the tokens file")
    if claimed is not None and claimed != reviewer.name:
        raise AuthorshipError(
            f"--reviewer {claimed!r} is not the token's reviewer ({reviewer.name!r})"
        )
    return Authorship(reviewer, None)


def check_labels(labels: Sequence[LabelEvent], reviewer: Reviewer) -> None:
    """Every label is ``reviewer``'s and of a tenant it may see; AuthorshipError lists
    the labels that are not (up to ten)."""
    problems = []
    for number, label in enumerate(labels, start=1):
        if label.reviewer != reviewer.name:
            problems.append(
                f"label {number} (answer {label.answer_id}) names reviewer {label.reviewer!r}, "
                f"not the token's {reviewer.name!r}"
            )
        elif not reviewer.may_see(label.tenant):
            problems.append(
                f"label {number} (answer {label.answer_id}): reviewer {reviewer.name!r} "
                f"may not label tenant {label.tenant!r}"
            )
    if problems:
        more = f" (and {len(problems) - _MAX_ERRORS} more)" if len(problems) > _MAX_ERRORS else ""
        raise AuthorshipError(" | ".join(problems[:_MAX_ERRORS]) + more)
