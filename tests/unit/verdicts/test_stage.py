"""The judging stage without a broker: validation, batching, flags, outcomes, records ready
to send (topic, key, value, headers), and isolation of every message (a failing answer, an
unencodable output, an output too large for its topic)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from streamproc.audit.options import AuditSettings
from streamproc.config import Settings
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    DeadLetter,
    DeadLetterReason,
    JudgeInfo,
)
from streamproc.inference.options import JudgeSettings
from streamproc.review.options import ReviewSettings
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.intake import parse_answer
from streamproc.verdicts.options import TopicSettings, WorkerSettings, applied_settings
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.stage import (
    IncomingMessage,
    StageLimits,
    StageOutput,
    judge_messages,
    trace_id_from_traceparent,
)
from streamproc.wiring import build_judge, output_topics, stage_limits

TOPICS = output_topics(Settings.model_construct())
"""What the stage writes to when given no topics."""
KINDS = {
    TOPICS.verdicts.name: "verdict",
    TOPICS.flags.name: "flag",
    TOPICS.outcomes.name: "outcome",
    TOPICS.dead_letters.name: "dead_letter",
    TOPICS.audit.name: "audit",
}


def kind(record: OutboundRecord) -> str:
    return KINDS[record.topic]


def kinds(output: StageOutput) -> list[str]:
    return [kind(record) for record in output.records]


def answer(event_id: str, text: str, evidence: str) -> dict[str, object]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": "t",
        "assistant_id": "bot",
        "model": "llm",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "question": "What happened to the order?",
        "answer": text,
        "evidence": [{"id": "D1", "text": evidence}],
    }


def message(
    document: object,
    offset: int,
    trace: str | None = None,
    headers: tuple[tuple[str, bytes], ...] = (),
) -> IncomingMessage:
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    return IncomingMessage(
        value=raw,
        origin=MessageOrigin("answers", 0, offset, b"conv"),
        trace_id=trace,
        headers=headers,
    )


GOOD = answer("e1", "The order was shipped on Monday [D1].", "The order was shipped on Monday.")
BAD = answer("e2", "The order was shipped on 3 May [D1].", "The order 7 was shipped on 5 May.")


def test_one_batch_gives_verdicts_flags_outcomes_and_dead_letters() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    output = judge_messages(
        [message(GOOD, 0, "abc"), message(b"{oops", 1), message(BAD, 2)],
        judge,
        limits=StageLimits(max_event_bytes=100_000),
    )
    assert [v.event_id for v in output.verdicts] == ["e1", "e2"]
    good, bad = output.verdicts
    assert good.judgement.action is Action.PASS and not good.judgement.hallucinated
    assert bad.judgement.hallucinated and bad.judgement.action is not Action.PASS
    assert [f.event_id for f in output.flags] == ["e2"]
    assert [o.event_id for o in output.outcomes] == ["e1", "e2"]
    assert output.outcomes[1].hallucinated
    assert good.trace_id == "abc" and good.timings.batch_size == 2
    assert good.judge == judge.info
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.BAD_JSON and letter.offset == 1


def test_duplicate_event_in_one_batch_is_judged_once() -> None:
    output = judge_messages(
        [message(GOOD, 0), message(GOOD, 1)],
        build_judge(JudgeSettings(name="rules")),
        limits=StageLimits(max_event_bytes=10**6),
    )
    assert len(output.verdicts) == 1
    assert [origin.offset for origin in output.repeats] == [1], "the repeat is accounted for"


class _BreaksOn:
    """A judge that fails on one answer, to prove the rest of the batch survives."""

    info = JudgeInfo(name="breaks", version="0", granularity="sentence")

    def __init__(self, poison: str) -> None:
        self._poison = poison
        self._inner = build_judge(JudgeSettings(name="rules"))

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        if any(a.event_id == self._poison for a in answers):
            raise RuntimeError("model exploded")
        return self._inner.judge_batch(answers, deadline_s=deadline_s)


def test_a_failing_answer_becomes_a_dead_letter_and_the_rest_is_judged() -> None:
    output = judge_messages(
        [message(GOOD, 0), message(BAD, 1)],
        _BreaksOn("e2"),
        limits=StageLimits(max_event_bytes=10**6),
    )
    assert [v.event_id for v in output.verdicts] == ["e1"]
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.PROCESSING_ERROR
    assert "model exploded" in letter.error and letter.offset == 1


def test_traceparent_parsing() -> None:
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert trace_id_from_traceparent(header) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_from_traceparent(header.encode()) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_from_traceparent("garbage") is None
    assert trace_id_from_traceparent(None) is None
    assert trace_id_from_traceparent("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None


# --- records ready to send ----------------------------------------------------------------

RULES = build_judge(JudgeSettings(name="rules"))
PARSE = "streamproc.verdicts.stage.parse_answer"  # patched to get past intake's checks
NOW = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_records_are_serialised_keyed_and_grouped_per_message() -> None:
    output = judge_messages(
        [message(GOOD, 0, "abc"), message(b"{oops", 1), message(BAD, 2)], RULES, now=NOW
    )
    assert [(kind(r), r.key) for r in output.records] == [
        ("verdict", b"ans-e1"),
        ("outcome", b"bot"),
        ("dead_letter", b"conv"),
        ("verdict", b"ans-e2"),
        ("flag", b"ans-e2"),
        ("outcome", b"bot"),
    ]
    values = [json.loads(r.value or b"") for r in output.records]
    typed = [
        output.verdicts[0],
        output.outcomes[0],
        output.dead_letters[0],
        output.verdicts[1],
        output.flags[0],
        output.outcomes[1],
    ]
    assert values == [model.model_dump(mode="json") for model in typed]
    assert output.verdicts[0].judged_at == NOW
    assert (values[2]["reason"], values[2]["offset"]) == ("bad_json", 1)
    assert base64.b64decode(values[2]["value_b64"]) == b"{oops"


class _Rewrites:
    """The rules judge, with each judgement passed through ``change`` (by event id)."""

    info = JudgeInfo(name="rewrites", version="0", granularity="sentence")

    def __init__(self, change: Callable[[str, AnswerJudgement], AnswerJudgement]) -> None:
        self._change = change

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        judged = RULES.judge_batch(answers, deadline_s=deadline_s)
        return [self._change(a.event_id, j) for a, j in zip(answers, judged, strict=True)]


def test_an_unencodable_judgement_costs_only_its_own_message() -> None:
    def surrogate(event_id: str, judgement: AnswerJudgement) -> AnswerJudgement:
        if event_id != "e2":
            return judgement
        claims = [c.model_copy(update={"text": "bad \ud800 text"}) for c in judgement.claims]
        return judgement.model_copy(update={"claims": claims})

    raw_bad = json.dumps(BAD).encode()
    output = judge_messages([message(GOOD, 0), message(BAD, 1)], _Rewrites(surrogate), now=NOW)
    assert kinds(output) == ["verdict", "outcome", "dead_letter"]
    assert [v.event_id for v in output.verdicts] == ["e1"]
    assert [o.event_id for o in output.outcomes] == ["e1"] and output.flags == []
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.PROCESSING_ERROR and letter.offset == 1
    assert "cannot build outputs" in letter.error and "surrogates not allowed" in letter.error
    document = json.loads(output.records[-1].value or b"")
    assert base64.b64decode(document["value_b64"]) == raw_bad


def test_an_answer_id_the_key_cannot_carry_is_a_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Intake refuses lone surrogates; this proves the stage does not rely on it.
    event = AnswerEvent.model_validate(GOOD).model_copy(update={"answer_id": "a\udcff"})
    monkeypatch.setattr(PARSE, lambda *args, **kwargs: event)
    output = judge_messages([message(GOOD, 5)], RULES, now=NOW)
    assert kinds(output) == ["dead_letter"]
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.PROCESSING_ERROR and letter.offset == 5
    assert "cannot build outputs: UnicodeEncodeError" in letter.error


def test_an_intake_bug_costs_only_its_own_message(monkeypatch: pytest.MonkeyPatch) -> None:

    def breaks_on_offset_1(raw: bytes | None, *args: Any, **kwargs: Any) -> object:
        if raw is not None and b"e2" in raw:
            raise MemoryError("intake ran out")
        return parse_answer(raw, *args, **kwargs)

    monkeypatch.setattr(PARSE, breaks_on_offset_1)
    output = judge_messages([message(GOOD, 0), message(BAD, 1)], RULES, now=NOW)
    assert [v.event_id for v in output.verdicts] == ["e1"]
    assert output.dead_letters[0].error == "cannot parse: MemoryError: intake ran out"


def test_a_judge_that_recurses_forever_loses_only_that_answer() -> None:
    class _Recurses:
        info = RULES.info

        def judge_batch(
            self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
        ) -> list[AnswerJudgement]:
            if any(a.event_id == "e2" for a in answers):
                raise RecursionError("maximum recursion depth exceeded")
            return RULES.judge_batch(answers, deadline_s=deadline_s)

    output = judge_messages([message(GOOD, 0), message(BAD, 1)], _Recurses(), now=NOW)
    assert [v.event_id for v in output.verdicts] == ["e1"]
    [letter] = output.dead_letters
    assert letter.error == "judge failed: RecursionError: maximum recursion depth exceeded"


def test_a_judge_that_miscounts_is_judged_one_by_one() -> None:
    class _Drops:
        info = RULES.info

        def judge_batch(
            self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
        ) -> list[AnswerJudgement]:
            return RULES.judge_batch(answers[:1], deadline_s=deadline_s)

    output = judge_messages([message(GOOD, 0), message(BAD, 1)], _Drops(), now=NOW)
    assert [v.event_id for v in output.verdicts] == ["e1", "e2"] and not output.dead_letters


def test_an_exception_that_cannot_print_itself_still_makes_a_dead_letter() -> None:
    class _Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    class _Raises:
        info = RULES.info

        def judge_batch(
            self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
        ) -> list[AnswerJudgement]:
            raise _Unprintable

    output = judge_messages([message(GOOD, 0)], _Raises(), now=NOW)
    assert output.dead_letters[0].error == "judge failed: _Unprintable: <unprintable>"


def test_when_even_the_dead_letter_fails_a_minimal_ascii_one_is_sent() -> None:
    raw = b"\xff not json"
    odd = IncomingMessage(value=raw, origin=MessageOrigin("answers-\ud800", 3, 9, b"k\xff"))
    output = judge_messages([odd, message(GOOD, 10)], RULES, now=NOW)
    assert kinds(output) == ["dead_letter", "verdict", "outcome"]
    record = output.records[0]
    assert record.key == b"k\xff"
    assert record.value is not None
    record.value.decode("ascii")  # ASCII-only JSON
    document = json.loads(record.value)
    assert document["reason"] == "bad_json" and document["topic"] == "answers-\\ud800"
    assert (document["partition"], document["offset"]) == (3, 9)
    assert base64.b64decode(document["value_b64"]) == raw
    assert base64.b64decode(document["key_b64"]) == b"k\xff"
    assert "rebuilt in ASCII after PydanticSerializationError" in document["error"]
    # It still reads as a DeadLetter for whoever replays it.
    assert DeadLetter.model_validate(document).offset == 9
    assert output.dead_letters[0].reason is DeadLetterReason.BAD_JSON


# --- limits --------------------------------------------------------------------------------


def test_limits_from_settings() -> None:
    settings = Settings(
        worker=WorkerSettings(
            max_event_bytes=1000,
            judge_deadline_s=2.5,
            event_time_max_future_s=60,
            event_time_max_past_s=3600,
        ),
        topics=TopicSettings(output_max_message_bytes=200_000),
    )
    assert stage_limits(settings, judge_key="nli+x") == StageLimits(
        max_event_bytes=1000,
        judge_deadline_s=2.5,
        event_time_max_future_s=60,
        event_time_max_past_s=3600,
        audit_settings=applied_settings(settings.judge, settings.worker, settings.topics),
        review=ReviewSampling(rate=0.02, judge_key="nli+x"),
    )
    no_audit = settings.model_copy(update={"audit": AuditSettings(enabled=False)})
    assert stage_limits(no_audit).audit_settings is None
    no_review = settings.model_copy(update={"review": ReviewSettings(enabled=False)})
    assert stage_limits(no_review).review is None


def test_each_judged_answer_has_an_audit_record_with_its_exact_bytes() -> None:
    limits = StageLimits(
        audit_settings=applied_settings(Settings().judge, Settings().worker, Settings().topics)
    )
    raw = json.dumps(GOOD, indent=3).encode()  # spacing a re-serialisation would lose
    output = judge_messages([message(raw, 4), message(b"[1]", 5)], RULES, limits=limits)
    audits = [r for r in output.records if kind(r) == "audit"]
    # Keyed by tenant and answer id: the audit topic is compacted.
    assert len(audits) == 1 and audits[0].key == f"{GOOD['tenant']}/ans-e1".encode()
    assert audits[0].value is not None
    record = AuditRecord.model_validate_json(audits[0].value)
    assert record.event_bytes() == raw
    assert (record.origin.partition, record.origin.offset) == (0, 4)
    assert record.judgement.action is output.verdicts[0].judgement.action


def test_an_event_over_max_event_bytes_is_a_dead_letter() -> None:
    output = judge_messages([message(GOOD, 0)], RULES, limits=StageLimits(max_event_bytes=10))
    assert output.dead_letters[0].reason is DeadLetterReason.OVERSIZED


def test_event_time_outside_the_bounds_is_a_dead_letter() -> None:
    limits = StageLimits(event_time_max_future_s=60, event_time_max_past_s=3600)
    late = datetime(2026, 1, 1, 2, tzinfo=UTC)  # GOOD/BAD happened at midnight
    output = judge_messages([message(GOOD, 0)], RULES, limits=limits, now=late)
    assert output.dead_letters[0].reason is DeadLetterReason.EVENT_TIME_OUT_OF_RANGE
    early = datetime(2025, 12, 31, 23, 58, tzinfo=UTC)
    output = judge_messages([message(GOOD, 0)], RULES, limits=limits, now=early)
    assert output.dead_letters[0].reason is DeadLetterReason.EVENT_TIME_OUT_OF_RANGE
    output = judge_messages([message(GOOD, 0)], RULES, limits=limits, now=NOW)
    assert [v.event_id for v in output.verdicts] == ["e1"]


def many_claims(event_id: str, judgement: AnswerJudgement) -> AnswerJudgement:
    """400 copies of the answer's claims, with signals: a verdict of about 250 kB."""
    [first] = judgement.claims[:1]
    signals = {f"signal_{n}": n / 3 for n in range(12)}
    claims = [
        first.model_copy(update={"index": i, "signals": signals, "text": f"{first.text} {i}"})
        for i in range(400)
    ]
    return judgement.model_copy(update={"claims": claims})


SMALL = output_topics(Settings(topics=TopicSettings(output_max_message_bytes=64 * 1024)))
"""Verdict, flag and outcome topics of 64 KiB."""


def test_a_verdict_too_large_for_its_topic_is_trimmed_and_still_flagged() -> None:
    output = judge_messages([message(BAD, 0)], _Rewrites(many_claims), topics=SMALL, now=NOW)
    assert kinds(output) == ["verdict", "flag", "outcome"]
    assert all(len(r.value or b"") + len(r.key or b"") <= 63 * 1024 for r in output.records)
    [verdict] = output.verdicts
    note = verdict.judgement.limits[-1]
    assert note.startswith("OUTPUT_TRIMMED: signals dropped; ") and "of 400 claims omitted" in note
    assert 0 < len(verdict.judgement.claims) < 400
    assert json.loads(output.records[0].value or b"") == verdict.model_dump(mode="json")


def test_a_verdict_that_cannot_be_trimmed_enough_is_a_dead_letter() -> None:
    def huge_trim(event_id: str, judgement: AnswerJudgement) -> AnswerJudgement:
        return judgement.model_copy(update={"trim_sentences": ["word " * 30_000]})

    output = judge_messages(
        [message(BAD, 0), message(GOOD, 1)], _Rewrites(huge_trim), topics=SMALL, now=NOW
    )
    assert kinds(output) == ["dead_letter", "dead_letter"]
    assert {d.reason for d in output.dead_letters} == {DeadLetterReason.OUTPUT_TOO_LARGE}
    assert not output.verdicts and not output.flags and not output.outcomes


def test_every_record_carries_the_headers_of_the_message_it_came_from() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    batch = [
        message(GOOD, 0, headers=(("traceparent", b"first"),)),
        message(b"{not json", 1, headers=(("traceparent", b"second"),)),
        message(BAD, 2, headers=(("traceparent", b"third"),)),
    ]
    output = judge_messages(batch, judge)
    by_headers: dict[tuple[tuple[str, bytes], ...], list[str]] = {}
    for record in output.records:
        by_headers.setdefault(record.headers, []).append(kind(record))
    assert by_headers == {
        (("traceparent", b"first"),): ["verdict", "outcome"],
        (("traceparent", b"second"),): ["dead_letter"],
        (("traceparent", b"third"),): ["verdict", "flag", "outcome"],
    }
    assert output.verdict_origins == [batch[0].origin, batch[2].origin]


def test_records_go_to_the_topics_given() -> None:
    settings = Settings(
        topics=TopicSettings(verdicts="v", flags="f", outcomes="o", dead_letter="d"),
        audit=AuditSettings(topic="a"),
    )
    output = judge_messages(
        [message(BAD, 0), message(b"[1]", 1)],
        RULES,
        limits=StageLimits(
            audit_settings=applied_settings(settings.judge, settings.worker, settings.topics)
        ),
        topics=output_topics(settings),
    )
    assert [r.topic for r in output.records] == ["v", "f", "o", "a", "d"]
