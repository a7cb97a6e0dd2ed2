"""The answers the stream and gate benchmarks send: ``python -m bench judge``'s sample
in an order where any prefix is an equal mix of task types, each answer handed out as a
fresh one (new ids, ``occurred_at`` = now). Changes when what is sent changes, not how."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.judge import sample_events
from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import TASKS, task_type_of

__all__ = ["Answers", "event_pool", "fresh"]


def event_pool(
    data: Sequence[Path] | None, tasks: Sequence[str] | None = None
) -> tuple[list[AnswerEvent], str]:
    """Every answer of the benchmark's sample (of ``tasks`` only, when given), one task
    type after another in turn, so that any prefix holds the mix of
    ``python -m bench judge`` (equal shares per type) and the first 3 x 20 are exactly
    its 60 answers."""
    events, origin = sample_events(data, per_task=100_000)
    by_task: dict[str, list[AnswerEvent]] = {}
    for event in events:
        task = task_type_of(event)
        if not tasks or task in tasks:
            by_task.setdefault(task, []).append(event)
    if not by_task:
        raise SystemExit(f"no answers of task type {', '.join(tasks or [])} in the sample")
    shortest = min(len(group) for group in by_task.values())
    ordered = sorted(by_task, key=lambda t: (TASKS.index(t) if t in TASKS else len(TASKS), t))
    pool = [by_task[task][i] for i in range(shortest) for task in ordered]
    counts = ", ".join(f"{task} {shortest}" for task in ordered)
    source = origin.split(" from ", 1)[-1].split(": the first", 1)[0]
    text = (
        f"{len(pool)} distinct answers ({counts}) from {source}: per task type in "
        "sha256(id) order, the types taken in turn (any prefix is an equal mix)"
    )
    return pool, text


def fresh(event: AnswerEvent, run: str, index: int) -> tuple[str, bytes, bytes]:
    """The answer as a new one: its id, key (the conversation, as producers key) and
    bytes, with ``occurred_at`` = now."""
    answer_id = f"{run}-a{index}"
    conversation = f"{run}-c{index}"
    copy = event.model_copy(
        update={
            "event_id": f"{run}-e{index}",
            "answer_id": answer_id,
            "conversation_id": conversation,
            "occurred_at": datetime.now(UTC),
        }
    )
    return answer_id, conversation.encode(), copy.model_dump_json().encode()


class Answers:
    """The pool handed out in order, each answer fresh (see :func:`fresh`)."""

    def __init__(self, pool: Sequence[AnswerEvent], run: str) -> None:
        self._pool = pool
        self._run = run
        self.taken = 0
        """Answers handed out so far: the next one is the pool's ``taken % len(pool)``."""
        self.repeats = 0

    @property
    def size(self) -> int:
        """Distinct answers in the pool."""
        return len(self._pool)

    def take(self) -> tuple[str, bytes, bytes]:
        index = self.taken
        self.taken += 1
        self.repeats += index >= len(self._pool)
        return fresh(self._pool[index % len(self._pool)], self._run, index)
