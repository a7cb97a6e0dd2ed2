"""AnswerStream without a socket: guesses at a sentence's end decide it once its
completion is known, a wrong guess is not used, and the final is the whole answer's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from streamproc.gate.answer_stream import AnswerStream
from streamproc.gate.service import GateService
from streamproc.inference.options import JudgeSettings
from streamproc.wiring import build_judge, gate_service
from tests.unit.gate.conftest import event, request, settings

FIRST = "The supplier delivered 80 of 100 pieces."
SECOND = "Incomplete orders cannot be billed."


@pytest.fixture()
async def service() -> AsyncIterator[GateService]:
    built = gate_service(settings(), build_judge(JudgeSettings(name="rules")))
    await built.start()
    yield built
    await built.close()


def _stream(service: GateService) -> AnswerStream:
    fields = event("")
    return AnswerStream(service, request(fields), fields, policy="fail-open", max_bytes=1 << 20)


async def test_a_guess_decides_the_sentence_its_completion_confirms(service: GateService) -> None:
    stream = _stream(service)
    assert stream.add(FIRST + " ") == 0
    assert stream.worth_guessing
    await stream.guess()
    assert not stream.worth_guessing  # the text as it stands was checked
    asked = service.counters.judged
    assert stream.add("Incomplete ") == 1
    [first] = await stream.check()
    assert service.counters.judged == asked  # the guess's decision, no new check
    assert (first.index, first.text, first.decision) == (0, FIRST, "hold")
    stream.add("orders cannot be billed.")
    await stream.guess()
    [second] = stream.end()  # decided at once: the guess read the whole answer
    assert (second.index, second.decision) == (1, "release")
    made = await stream.final()
    assert isinstance(made, tuple)
    last, final, result = made
    assert last == []  # the last sentence was decided by end()
    assert final.decision.value == "trim" and final.answer_text == SECOND
    assert result.reply.verdict.judgement.claims  # the final is a fresh, whole decision


async def test_a_guess_proved_wrong_is_not_used(service: GateService) -> None:
    stream = _stream(service)
    stream.add("The supplier delivered 9")
    stream.add("0 of 100 pieces in 3.")
    assert stream.worth_guessing
    await stream.guess()
    asked = service.counters.judged
    stream.add("5 weeks. Incomplete ")  # "3." was not the end: "3.5 weeks."
    [first] = await stream.check()
    assert service.counters.judged == asked + 1  # checked afresh
    assert first.text == "The supplier delivered 90 of 100 pieces in 3.5 weeks."


def test_no_guess_without_a_sentence_end(service: GateService) -> None:
    stream = _stream(service)
    stream.add("The supplier delivered 90 of 100")
    assert not stream.worth_guessing
    stream.add(' pieces."  ')
    assert stream.worth_guessing
