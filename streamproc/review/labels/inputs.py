"""One record of a reviewers' loop input topic read as its model, or the reason its
dead letter gives: not JSON at all, or JSON that is not the model."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from streamproc.contracts.events import DeadLetterReason
from streamproc.verdicts.dead_letter import Rejection

__all__ = ["parse_input"]

M = TypeVar("M", bound=BaseModel)


def parse_input(model: type[M], value: bytes | None, what: str) -> M | Rejection:
    """``value`` as a ``model`` (``what`` names it in the rejection: "review item").
    A tombstone or a document nested too deeply is rejected too, never raised."""
    try:
        document = json.loads(value or b"")
    except (ValueError, RecursionError) as exc:
        return Rejection(DeadLetterReason.BAD_JSON, f"{what} is not JSON: {exc}")
    try:
        return model.model_validate(document)
    except (ValidationError, RecursionError) as exc:
        return Rejection(DeadLetterReason.SCHEMA_VIOLATION, f"bad {what}: {exc}")
