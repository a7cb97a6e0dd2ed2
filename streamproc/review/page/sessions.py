"""The review page's open sessions, kept on the server so that signing out ends one.

A session cookie is signed, but a signature alone cannot be taken back: a copied cookie
would stay good until it expires. So every sign-in opens a session id here, and a cookie
is accepted only while its id is open, for its reviewer, and not older than the maximum
age. Signing out closes the id at once.

The book is bounded: at most ``per_reviewer`` sessions per reviewer (a new sign-in
closes that reviewer's oldest), and only reviewers of the tokens file can sign in, so it
never holds more than reviewers x ``per_reviewer`` ids; expired ones are dropped as new
ones open. It lives in the page's memory: a restart signs everyone out (the signing key is
drawn at start anyway), and replicas behind one address need sticky sessions.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["OpenSession", "SessionBook"]

DEFAULT_PER_REVIEWER = 16


@dataclass(frozen=True, slots=True)
class OpenSession:
    """An open session: its id (in the cookie), whose it is and when it was opened."""

    sid: str
    reviewer: str
    issued: int


class SessionBook:
    """Open session ids, each for ``max_age_s`` from sign-in or until closed."""

    def __init__(
        self,
        *,
        max_age_s: float,
        per_reviewer: int = DEFAULT_PER_REVIEWER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if per_reviewer < 1:
            raise ValueError("per_reviewer must be at least 1")
        self.max_age_s = max_age_s
        self._per_reviewer = per_reviewer
        self._clock = clock
        # reviewer -> sid -> issued, oldest first
        self._open: dict[str, OrderedDict[str, int]] = {}

    def open(self, reviewer: str) -> OpenSession:
        """A new session for ``reviewer``; its oldest is closed when it has too many."""
        now = int(self._clock())
        mine = self._open.setdefault(reviewer, OrderedDict())
        for sid, issued in list(mine.items()):
            if now - issued > self.max_age_s:
                del mine[sid]
        while len(mine) >= self._per_reviewer:
            mine.popitem(last=False)
        sid = secrets.token_urlsafe(18)
        mine[sid] = now
        return OpenSession(sid, reviewer, now)

    def is_open(self, sid: str, reviewer: str, issued: int) -> bool:
        """True while the session is open, the reviewer's, issued when the cookie says
        and not past its maximum age."""
        mine = self._open.get(reviewer)
        if mine is None or mine.get(sid) != issued:
            return False
        if not 0 <= self._clock() - issued <= self.max_age_s:
            del mine[sid]
            return False
        return True

    def close(self, sid: str, reviewer: str) -> bool:
        """End the session (sign-out); False when it was not open."""
        mine = self._open.get(reviewer)
        if mine is None or mine.pop(sid, None) is None:
            return False
        if not mine:
            del self._open[reviewer]
        return True

    def __len__(self) -> int:
        return sum(len(mine) for mine in self._open.values())
