"""The judge's stages, collected only when someone asks and never mixed across threads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from streamproc.contracts.events import AnswerEvent, EvidenceItem
from streamproc.inference.options import JudgeSettings
from streamproc.judge.stage_times import collecting, stage
from streamproc.wiring import build_judge


def _answer(text: str) -> AnswerEvent:
    return AnswerEvent(
        event_id="e1",
        answer_id="a1",
        conversation_id="c1",
        tenant="t",
        assistant_id="bot",
        model="m",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        question="When does the store open?",
        answer=text,
        evidence=[EvidenceItem(id="D1", text="The store opens at 9 am on weekdays.")],
    )


def test_the_rules_judge_reports_its_stages_in_order_when_collected() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    with collecting() as times:
        judge.judge_batch([_answer("The store opens at 7 am.")])
    assert [t.name for t in times] == ["claims", "check", "decide"]
    assert all(t.start_ns <= t.end_ns for t in times)
    assert times[0].end_ns <= times[1].start_ns <= times[2].start_ns


def test_nothing_is_recorded_without_a_collector_and_threads_do_not_mix() -> None:
    with stage("alone"):
        pass  # no collector: nothing to record, nothing raised
    seen: dict[str, list[str]] = {}

    def work(name: str) -> None:
        with collecting() as times, stage(name):
            pass
        seen[name] = [t.name for t in times]

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {f"t{i}": [f"t{i}"] for i in range(4)}
