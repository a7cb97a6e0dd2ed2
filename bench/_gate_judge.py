"""The baseline the gate is compared with: the default judge alone, one answer per
call, timed in a fresh process of its own (its models, its peak RSS)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from bench._gate_summary import summarise_ms
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent

__all__ = ["JUDGE_WARM_UP", "judge_alone", "time_judge_alone"]

JUDGE_WARM_UP = 5
"""Untimed judge calls before the judge alone is timed (the last answers of the pool)."""


def time_judge_alone(events_json: list[str], warm_json: list[str]) -> dict[str, Any]:
    """The default judge's own time per answer, one answer per call (as the gate sees a
    quiet stream), after untimed warm-up calls on other answers (models load, and the
    language detector loads on the first answer long enough to need it). Runs in a fresh
    process."""
    import resource

    from streamproc.wiring import build_judge

    events = [AnswerEvent.model_validate_json(text) for text in events_json]
    settings = Settings().judge
    judge = build_judge(settings)
    for text in warm_json:  # warm-up, not timed
        judge.judge_batch([AnswerEvent.model_validate_json(text)])
    times_ms = []
    for event in events:
        start = time.perf_counter()
        judge.judge_batch([event])
        times_ms.append((time.perf_counter() - start) * 1000)
    return {
        "judge": settings.name,
        "answers": len(events),
        "ms": summarise_ms(times_ms),
        "per_answer_ms": times_ms,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def judge_alone(events: Sequence[AnswerEvent], warm: Sequence[AnswerEvent]) -> dict[str, Any]:
    """:func:`time_judge_alone` in a fresh spawned process (its models, its peak RSS)."""
    payload = [event.model_dump_json() for event in events]
    warm_payload = [event.model_dump_json() for event in warm]
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        result: dict[str, Any] = pool.submit(time_judge_alone, payload, warm_payload).result()
    return result
