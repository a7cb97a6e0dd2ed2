"""The gate service end to end without a broker: the budget holds, the policy decides
what could not be checked, overload is shed at once and the gate recovers, and the
monitored records are those of the judgement replied with."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    JudgeInfo,
    UnverifiedReason,
)
from streamproc.contracts.gate_events import GateError, GateReply
from streamproc.gate.sensor import NullGateSensor
from streamproc.gate.service import GateService
from streamproc.inference.options import JudgeSettings
from streamproc.wiring import build_judge, gate_service, output_topics
from tests.unit.gate.conftest import NOTE, SlowScorer, event, request, settings, slow_nli

SLACK_S = 0.5
"""Generous: the tests assert within budget + this, never a tighter time."""
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
MIXED = "The supplier delivered 90 of 100 pieces.  The moon is made of green cheese. " + (
    "Incomplete orders cannot be billed."
)


class RecordingSensor(NullGateSensor):
    def __init__(self) -> None:
        self.pending_counts: list[int] = []
        self.batches: list[int] = []

    def decided(self, reply: GateReply, *, path: str) -> None:
        del reply, path

    def pending(self, count: int) -> None:
        self.pending_counts.append(count)

    def judged(self, batch_size: int, judge_ms: float) -> None:
        self.batches.append(batch_size)


class BrokenJudge:
    info = JudgeInfo(name="broken", version="1", granularity="atomic")

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        raise RuntimeError("the judge is broken")


async def started(service: GateService) -> GateService:
    await service.start()
    return service


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
async def test_the_budget_holds_with_a_slow_model_and_the_rest_is_unverified() -> None:
    scorer = SlowScorer()
    service = await started(gate_service(settings(settle_reserve_ms=25), slow_nli(scorer)))
    scorer.delay_s = 1.5
    try:
        began = time.monotonic()
        result = await service.check(
            request(event("Incomplete orders cannot be delivered."), budget_ms=200)
        )
        took = time.monotonic() - began
    finally:
        await service.close()
    reply = result.reply
    assert (reply.verified, reply.reason) == (False, UnverifiedReason.BUDGET_EXCEEDED)
    assert reply.decision is Action.PASS and reply.policy == "fail-open"
    assert reply.answer_text == "Incomplete orders cannot be delivered."
    assert [c.verdict for c in reply.verdict.judgement.claims] == ["unverified"]
    assert took < 0.2 + SLACK_S
    assert reply.latency_ms < 200 + SLACK_S * 1000


async def test_a_record_contradiction_still_withholds_when_the_budget_runs_out() -> None:
    scorer = SlowScorer()
    service = await started(gate_service(settings(), slow_nli(scorer)))
    scorer.delay_s = 1.5
    try:
        result = await service.check(
            request(
                event(
                    "The supplier delivered 80 of 100 pieces. Incomplete orders cannot be billed."
                ),
                budget_ms=150,
            )
        )
    finally:
        await service.close()
    assert result.reply.verified is False
    assert result.reply.decision is Action.WITHHOLD and result.reply.answer_text == ""
    judgement = result.reply.verdict.judgement
    assert judgement.hallucinated
    assert [c.verdict for c in judgement.claims] == ["contradicted", "unverified"]


async def test_fail_closed_withholds_what_could_not_be_checked() -> None:
    scorer = SlowScorer()
    gate = settings(policies=[{"tenant": "careful", "policy": "fail-closed"}])
    service = await started(gate_service(gate, slow_nli(scorer)))
    scorer.delay_s = 1.0
    try:
        closed, opened = await asyncio.gather(
            service.check(request(event("Orders ship.", tenant="careful"), budget_ms=100)),
            service.check(request(event("Orders ship.", event_id="e2"), budget_ms=100)),
        )
    finally:
        await service.close()
    assert closed.reply.decision is Action.WITHHOLD and closed.reply.answer_text == ""
    assert closed.reply.policy == "fail-closed" and closed.reply.verified is False
    assert opened.reply.decision is Action.PASS and opened.reply.answer_text == "Orders ship."


@pytest.mark.timing  # shedding is judged by wall-clock budgets: .ci/run runs these alone
async def test_overload_is_shed_at_once_and_memory_stays_bounded_then_the_gate_recovers() -> None:
    scorer = SlowScorer()
    sensor = RecordingSensor()
    gate = settings(batch_max=2, max_pending_factor=2, settle_reserve_ms=10)
    service = await started(gate_service(gate, slow_nli(scorer), sensor=sensor))
    scorer.delay_s = 0.05
    try:
        burst = [
            request(event("Incomplete orders cannot be delivered.", event_id=f"b{i}"), budget_ms=80)
            for i in range(120)
        ]
        began = time.monotonic()
        results = await asyncio.gather(*(service.check(r) for r in burst))
        took = time.monotonic() - began
        reasons = [r.reply.reason for r in results]
        assert reasons.count(UnverifiedReason.OVERLOADED) >= 100
        assert all(r.reply.latency_ms < 80 + SLACK_S * 1000 for r in results)
        assert took < 0.08 + SLACK_S
        assert max(sensor.pending_counts) <= 2 * 2
        assert service.counters.max_pending <= 4
        shed = next(r for r in results if r.reply.reason is UnverifiedReason.OVERLOADED)
        assert shed.judge_ms is None and shed.reply.decision is Action.PASS
        assert shed.reply.verdict.judgement.claims == []

        for _ in range(200):  # the queue drains
            if service.pending == 0:
                break
            await asyncio.sleep(0.01)
        again = await service.check(
            request(event("Incomplete orders cannot be delivered.", event_id="r"), budget_ms=3000)
        )
    finally:
        await service.close()
    assert again.reply.verified is True and again.reply.reason is None
    assert again.judge_ms is not None


async def test_concurrent_requests_share_one_judge_call() -> None:
    scorer = SlowScorer()
    sensor = RecordingSensor()
    service = await started(gate_service(settings(batch_max=8), slow_nli(scorer), sensor=sensor))
    scorer.delay_s = 0.05
    try:
        texts = [f"Incomplete orders cannot be delivered {i}." for i in range(5)]
        results = await asyncio.gather(
            *(
                service.check(request(event(t, event_id=f"c{i}"), budget_ms=5000))
                for i, t in enumerate(texts)
            )
        )
    finally:
        await service.close()
    assert all(r.reply.reason is None for r in results)
    assert len(sensor.batches) < 5 and sum(sensor.batches) == 5


async def test_the_rules_judge_trims_the_answer_text_exactly() -> None:
    service = await started(gate_service(settings(), build_judge(JudgeSettings(name="rules"))))
    try:
        result = await service.check(request(event(MIXED), budget_ms=2000))
    finally:
        await service.close()
    reply = result.reply
    assert reply.verified and reply.decision is Action.TRIM
    assert reply.verdict.judgement.trim_sentences == ["The moon is made of green cheese."]
    assert reply.answer_text == (
        "The supplier delivered 90 of 100 pieces.  Incomplete orders cannot be billed."
    )


async def test_records_carry_the_replied_verdict_and_the_callers_trace() -> None:
    topics = output_topics(settings())
    service = await started(gate_service(settings(), build_judge(JudgeSettings(name="rules"))))
    try:
        result = await service.check(
            request(
                event(MIXED),
                headers=(("traceparent", TRACEPARENT.encode()),),
                trace_id=TRACE_ID,
            )
        )
    finally:
        await service.close()
    by_topic = {record.topic: record for record in result.records}
    assert {topics.verdicts.name, topics.flags.name, topics.outcomes.name} <= set(by_topic)
    verdict = json.loads(by_topic[topics.verdicts.name].value or b"")
    assert verdict["trace_id"] == TRACE_ID == result.reply.verdict.trace_id
    assert verdict["judgement"]["action"] == result.reply.decision.value
    assert all(("traceparent", TRACEPARENT.encode()) in r.headers for r in result.records)
    audit = json.loads(by_topic[topics.audit.name].value or b"")
    assert audit["origin"]["topic"] == "gate.http"


async def test_publish_off_gives_no_records() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    service = await started(gate_service(settings(publish=False), judge))
    try:
        result = await service.check(request(event(MIXED)))
    finally:
        await service.close()
    assert result.records == []
    assert result.reply.decision is Action.TRIM


async def test_a_judge_error_answers_by_policy() -> None:
    gate = settings(policies=[{"tenant": "careful", "policy": "fail-closed"}])
    service = await started(gate_service(gate, BrokenJudge()))
    try:
        opened, closed = await asyncio.gather(
            service.check(request(event("Orders ship."))),
            service.check(request(event("Orders ship.", event_id="e2", tenant="careful"))),
        )
    finally:
        await service.close()
    assert (opened.reply.verified, opened.reply.reason) == (False, UnverifiedReason.JUDGE_ERROR)
    assert opened.reply.decision is Action.PASS
    assert closed.reply.decision is Action.WITHHOLD


async def test_a_closed_service_is_not_ready_and_answers_by_policy() -> None:
    service = await started(gate_service(settings(), build_judge(JudgeSettings(name="rules"))))
    assert service.ready()
    await service.close()
    assert not service.ready()
    result = await service.check(request(event(MIXED)))
    assert result.reply.reason is UnverifiedReason.JUDGE_ERROR


def test_the_budget_header() -> None:
    service = gate_service(settings(max_budget_ms=1000), build_judge(JudgeSettings(name="rules")))
    assert service.budget(None) == 500
    assert service.budget("250") == 250 and service.budget(b" 120.5 ") == 120.5
    assert service.budget("99999") == 1000
    for bad in ("abc", "-1", "0", "nan", "inf", b"\xff"):
        found = service.budget(bad)
        assert isinstance(found, GateError) and found.error == "bad_budget"


def test_parse_applies_the_intake_limits() -> None:
    service = gate_service(settings(), build_judge(JudgeSettings(name="rules")))
    assert isinstance(service.parse(json.dumps(event("Fine.")).encode()), AnswerEvent)
    for bad in (None, b"{", b"{}", b"x" * 10_000_000):
        assert not isinstance(service.parse(bad), AnswerEvent)


async def test_an_answer_in_an_unsupported_language_goes_through_the_policy() -> None:
    german = (
        "Der Lieferant hat neunzig von hundert Teilen geliefert, und unvollständige "
        "Bestellungen können weder geliefert noch abgerechnet werden."
    )
    gate = settings(policies=[{"tenant": "careful", "policy": "fail-closed"}])
    service = await started(gate_service(gate, build_judge(JudgeSettings(name="rules"))))
    try:
        opened, closed = await asyncio.gather(
            service.check(request(event(german))),
            service.check(request(event(german, event_id="e2", tenant="careful"))),
        )
    finally:
        await service.close()
    assert opened.reply.verified is False
    assert opened.reply.reason is UnverifiedReason.LANGUAGE_NOT_SUPPORTED
    assert opened.reply.decision is Action.PASS and opened.reply.answer_text == german
    assert closed.reply.decision is Action.WITHHOLD and closed.reply.answer_text == ""


@pytest.mark.timing  # its 60 ms budget can run out while a starved runner builds the body
async def test_a_large_body_is_judged_alone_and_shed_when_it_alone_cannot_fit() -> None:
    scorer = SlowScorer()
    sensor = RecordingSensor()
    service = await started(gate_service(settings(batch_max=4), slow_nli(scorer), sensor=sensor))
    scorer.delay_s = 0.01
    big_evidence = [{"id": "D1", "text": NOTE * 300}]  # ~27 KB: ~7 work units
    try:
        for i in range(6):  # learn the cost of one-unit requests
            await service.check(request(event("Incomplete orders.", event_id=f"w{i}")))
        sensor.batches.clear()
        mixed = [
            request(
                event("Incomplete orders.", event_id="big", evidence=big_evidence), budget_ms=5000
            ),
            *(
                request(event("Incomplete orders.", event_id=f"s{i}"), budget_ms=5000)
                for i in range(3)
            ),
        ]
        await asyncio.gather(*(service.check(r) for r in mixed))
        batches = list(sensor.batches)
        hopeless = await service.check(
            request(
                event(
                    "Incomplete orders.", event_id="h", evidence=[{"id": "D1", "text": NOTE * 6000}]
                ),
                budget_ms=60,
            )
        )
    finally:
        await service.close()
    assert batches[0] == 1, batches  # the large body alone; the small ones together after it
    assert sum(batches) == 4
    assert hopeless.reply.reason is UnverifiedReason.OVERLOADED
    assert hopeless.judge_ms is None
