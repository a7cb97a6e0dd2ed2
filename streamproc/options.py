"""The base of every option group: frozen, and no unknown field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["OptionGroup"]


class OptionGroup(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
