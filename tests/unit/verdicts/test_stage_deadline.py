"""The per-answer judge deadline in the stage: an answer that overruns it becomes a
``judge_timeout`` dead letter and the rest of its batch is judged, in about the time of
the deadline plus a clean batch."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    DeadLetterReason,
    JudgeInfo,
    Outcome,
)
from streamproc.judge.deadline import AnswerTimedOut, Deadline
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import IncomingMessage, StageLimits, judge_messages
from tests.unit.verdicts.test_stage import TOPICS

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
STEP_S = 0.001
GOOD_STEPS = 2
SLOW_STEPS = 5000  # 5 s of work: far past any deadline used here
JUDGEMENT = AnswerJudgement(
    claims=[],
    checked_claims=0,
    supported_claims=0,
    contradicted_claims=0,
    unsupported_claims=0,
    faithfulness=None,
    hallucinated=False,
    abstained=False,
    outcome=Outcome.CORRECT,
    action=Action.PASS,
)


class _Sleepy:
    """Works through the batch one answer at a time, a few short sleeps per answer, and
    checks each answer's :class:`Deadline` between them, as the real judges do."""

    info = JudgeInfo(name="sleepy", version="0", granularity="sentence")

    def __init__(self, slow: set[str], broken: set[str] | None = None) -> None:
        self.slow = slow
        self.broken = broken or set()
        self.calls: list[tuple[int, float | None]] = []

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        self.calls.append((len(answers), deadline_s))
        judged = []
        for index, answer in enumerate(answers):
            if answer.event_id in self.broken:
                raise RuntimeError(f"cannot judge {answer.event_id}")
            clock = Deadline(deadline_s).start(index)
            for _ in range(SLOW_STEPS if answer.event_id in self.slow else GOOD_STEPS):
                time.sleep(STEP_S)
                clock.check()
            judged.append(JUDGEMENT)
        return judged


def message(event_id: str, offset: int) -> IncomingMessage:
    document = {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": "t",
        "assistant_id": "bot",
        "model": "llm",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "answer": "The order shipped.",
        "evidence": [{"id": "D1", "text": "The order shipped."}],
    }
    return IncomingMessage(json.dumps(document).encode(), MessageOrigin("answers", 0, offset, None))


def batch(slow_at: int | None, size: int = 100) -> list[IncomingMessage]:
    ids = [f"g{i}" for i in range(size)]
    if slow_at is not None:
        ids.insert(slow_at, "slow")
    return [message(event_id, offset) for offset, event_id in enumerate(ids)]


def timed(messages: list[IncomingMessage], judge: _Sleepy, limits: StageLimits) -> float:
    started = time.perf_counter()
    judge_messages(messages, judge, limits=limits, now=NOW)
    return time.perf_counter() - started


def test_a_slow_answer_is_dead_lettered_and_the_batch_is_judged_in_bounded_time() -> None:
    deadline_s = 0.2
    limits = StageLimits(judge_deadline_s=deadline_s)
    output = judge_messages(batch(slow_at=50), _Sleepy({"slow"}), limits=limits, now=NOW)
    assert len(output.verdicts) == 100 and "slow" not in {v.event_id for v in output.verdicts}
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.JUDGE_TIMEOUT and letter.offset == 50
    assert "0.2 s budget per answer" in letter.error
    # Its record sits where the message was: after the 50 answers before it (2 records each).
    assert output.records[100].topic == TOPICS.dead_letters.name
    assert json.loads(output.records[100].value or b"")["reason"] == "judge_timeout"

    # Time: the slow answer costs its deadline; the answers judged before it are judged
    # again in the retry, so about deadline + 1.5 clean batches. Median of three runs.
    clean = statistics.median(timed(batch(None), _Sleepy(set()), limits) for _ in range(3))
    total = statistics.median(timed(batch(50), _Sleepy({"slow"}), limits) for _ in range(3))
    assert (total - deadline_s) / clean < 2.0, (total, clean)
    assert total < SLOW_STEPS * STEP_S / 5  # far below the slow answer's own work


@pytest.mark.timing  # a 50 ms judge deadline: run alone, not beside busy workers
def test_each_round_removes_one_slow_answer() -> None:
    judge = _Sleepy({"g3", "g7", "g9"})
    output = judge_messages(
        batch(None, size=10), judge, limits=StageLimits(judge_deadline_s=0.05), now=NOW
    )
    assert [v.event_id for v in output.verdicts] == ["g0", "g1", "g2", "g4", "g5", "g6", "g8"]
    assert [d.offset for d in output.dead_letters] == [3, 7, 9]
    assert {d.reason for d in output.dead_letters} == {DeadLetterReason.JUDGE_TIMEOUT}
    assert judge.calls == [(10, 0.05), (9, 0.05), (8, 0.05), (7, 0.05)]


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
def test_the_one_by_one_fallback_keeps_the_deadline() -> None:
    judge = _Sleepy(slow={"g1"}, broken={"g2"})
    limits = StageLimits(judge_deadline_s=0.05)
    started = time.perf_counter()
    output = judge_messages(batch(None, size=4), judge, limits=limits, now=NOW)
    elapsed = time.perf_counter() - started
    assert [v.event_id for v in output.verdicts] == ["g0", "g3"]
    reasons = {d.offset: d.reason for d in output.dead_letters}
    assert reasons == {1: DeadLetterReason.JUDGE_TIMEOUT, 2: DeadLetterReason.PROCESSING_ERROR}
    assert all(deadline == 0.05 for _, deadline in judge.calls)
    assert elapsed < SLOW_STEPS * STEP_S / 5


def test_a_timeout_naming_no_answer_of_the_batch_falls_back_to_one_by_one() -> None:
    class _Confused(_Sleepy):
        def judge_batch(
            self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
        ) -> list[AnswerJudgement]:
            if len(answers) > 1:
                raise AnswerTimedOut(len(answers) + 5, 1.0, 0.5)
            return super().judge_batch(answers, deadline_s=deadline_s)

    output = judge_messages(batch(None, size=3), _Confused(set()), now=NOW)
    assert [v.event_id for v in output.verdicts] == ["g0", "g1", "g2"]
    assert not output.dead_letters
