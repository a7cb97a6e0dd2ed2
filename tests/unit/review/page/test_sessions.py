"""The review page's session book: a session is good from sign-in until sign-out or its
maximum age, for its own reviewer only, and the book stays bounded."""

from __future__ import annotations

from streamproc.review.page.sessions import SessionBook


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_open_until_closed() -> None:
    book = SessionBook(max_age_s=3600, clock=Clock())
    opened = book.open("alice")
    assert book.is_open(opened.sid, "alice", opened.issued)
    assert book.close(opened.sid, "alice")
    assert not book.is_open(opened.sid, "alice", opened.issued)
    assert not book.close(opened.sid, "alice")  # closing twice is harmless
    assert len(book) == 0


def test_a_session_expires_at_its_maximum_age() -> None:
    clock = Clock()
    book = SessionBook(max_age_s=60, clock=clock)
    opened = book.open("alice")
    clock.now += 60
    assert book.is_open(opened.sid, "alice", opened.issued)
    clock.now += 1
    assert not book.is_open(opened.sid, "alice", opened.issued)
    assert len(book) == 0, "an expired session is dropped when seen"


def test_a_session_is_only_its_reviewers_and_its_issue_time() -> None:
    book = SessionBook(max_age_s=3600, clock=Clock())
    opened = book.open("alice")
    assert not book.is_open(opened.sid, "gina", opened.issued)
    assert not book.is_open(opened.sid, "alice", opened.issued - 1)
    assert not book.close(opened.sid, "gina")
    assert book.is_open(opened.sid, "alice", opened.issued)


def test_the_book_keeps_a_bounded_number_of_sessions_per_reviewer() -> None:
    clock = Clock()
    book = SessionBook(max_age_s=3600, per_reviewer=3, clock=clock)
    sessions = []
    for _ in range(5):
        sessions.append(book.open("alice"))
        clock.now += 1
    other = book.open("gina")
    assert len(book) == 4
    assert [book.is_open(s.sid, "alice", s.issued) for s in sessions] == [
        False,
        False,
        True,
        True,
        True,
    ]
    assert book.is_open(other.sid, "gina", other.issued), "one reviewer never evicts another"


def test_expired_sessions_are_dropped_when_the_reviewer_signs_in_again() -> None:
    clock = Clock()
    book = SessionBook(max_age_s=60, clock=clock)
    for _ in range(10):
        book.open("alice")
    clock.now += 61
    book.open("alice")
    assert len(book) == 1
