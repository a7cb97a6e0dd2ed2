"""Admission by bytes: one caller's large bodies are held to its share, the total is
bounded, and a lone large body is never refused for its size alone."""

from __future__ import annotations

from streamproc.gate.body_budget import BodyBudget, Held

KB = 1024


def test_a_caller_is_held_to_its_share_while_others_still_get_in() -> None:
    budget = BodyBudget(max_bytes=2048 * KB, max_caller_bytes=1000 * KB)
    first = budget.reserve("big", 480 * KB)
    second = budget.reserve("big", 480 * KB)
    assert isinstance(first, Held) and isinstance(second, Held)
    assert budget.reserve("big", 480 * KB) == "caller_busy"
    assert isinstance(budget.reserve("small", 2 * KB), Held)
    budget.release(first)
    assert isinstance(budget.reserve("big", 480 * KB), Held)


def test_the_total_is_bounded_and_released_bytes_come_back() -> None:
    budget = BodyBudget(max_bytes=100, max_caller_bytes=100)
    held = [budget.reserve(caller, 40) for caller in ("a", "b")]
    assert budget.reserve("c", 40) == "busy"
    for each in held:
        assert isinstance(each, Held)
        budget.release(each)
    assert budget.held == 0 and budget.caller_bytes("a") == 0


def test_a_lone_body_over_the_share_is_admitted() -> None:
    budget = BodyBudget(max_bytes=10, max_caller_bytes=10)
    assert isinstance(budget.reserve("a", 500), Held)
