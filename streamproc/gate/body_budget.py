"""Admission by bytes: how much request body the gate holds at once, in all and per caller.

A body is held from the moment its length is known (before a byte is read) until its
reply is sent: read, parsed, queued, judged, its records built. Counting requests alone
lets one caller's 480 KB bodies fill the memory and the judge while another's small
requests wait; a byte budget per caller keeps that caller to its own share, and a total
budget bounds what all of them hold (so RSS stays bounded). A request over either is
refused at once, never queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["BodyBudget", "Held"]

Refusal = Literal["busy", "caller_busy"]


@dataclass(frozen=True, slots=True)
class Held:
    """A reservation to give back once the reply is sent."""

    caller: str
    size: int


@dataclass(slots=True)
class BodyBudget:
    """Bytes of bodies held, in all and per caller, against their limits."""

    max_bytes: int
    max_caller_bytes: int
    held: int = 0
    _by_caller: dict[str, int] = field(default_factory=dict)

    def reserve(self, caller: str, size: int) -> Held | Refusal:
        """Hold ``size`` bytes for ``caller``, or say which budget refuses. A caller that
        holds nothing may always send one body up to the intake limit, so a lone large
        request is never refused for its size alone."""
        mine = self._by_caller.get(caller, 0)
        if mine and mine + size > self.max_caller_bytes:
            return "caller_busy"
        if self.held and self.held + size > self.max_bytes:
            return "busy"
        self._by_caller[caller] = mine + size
        self.held += size
        return Held(caller, size)

    def release(self, held: Held) -> None:
        left = self._by_caller.get(held.caller, 0) - held.size
        if left > 0:
            self._by_caller[held.caller] = left
        else:
            self._by_caller.pop(held.caller, None)
        self.held = max(0, self.held - held.size)

    def caller_bytes(self, caller: str) -> int:
        return self._by_caller.get(caller, 0)
