"""Log lines about an answer name it, and never quote its evidence, question or answer
unless ``audit.log_texts`` allows it."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from pydantic import ValidationError

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.telemetry.log_context import (
    add_answer_context,
    answer_processors,
    bound_answer,
    current_answer_fields,
    scrub_error_text,
)
from tests.unit.telemetry.conftest import BAD, EVIDENCE, Otel

QUESTION = str(BAD["question"])
ANSWER = str(BAD["answer"])
CUT = f"<{len(EVIDENCE)} chars cut>"


def line_logger(log_texts: bool = False) -> Any:
    """A structlog logger that returns each rendered JSON line (no global config), with
    the processors ``configure_logging`` will insert."""
    settings = Settings.model_validate({"audit": {"log_texts": log_texts}})
    return structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[
            *answer_processors(log_texts=settings.audit.log_texts),
            structlog.processors.JSONRenderer(),
        ],
    )


def render(log: Any, event: str, **fields: Any) -> dict[str, Any]:
    return dict(json.loads(log.info(event, **fields)))


def test_texts_are_withheld_by_default() -> None:
    event = AnswerEvent.model_validate(BAD)
    line = line_logger().info(
        "judged",
        evidence=[{"id": "D1", "text": EVIDENCE}],
        question=QUESTION,
        answer=ANSWER,
        event_model=event,
        nested={"premise": EVIDENCE, "count": 2},
        claims=1,
    )
    for text in (EVIDENCE, QUESTION, ANSWER, "Lyon", "3 May"):
        assert text not in line
    fields = json.loads(line)
    assert fields["claims"] == 1  # numbers under a text name are kept
    assert fields["nested"]["count"] == 2
    assert fields["event_model"] == "<AnswerEvent: [redacted]>"


def test_texts_pass_when_log_texts_allows_them() -> None:
    fields = render(line_logger(log_texts=True), "judged", evidence=EVIDENCE, answer=ANSWER)
    assert fields["evidence"] == EVIDENCE and fields["answer"] == ANSWER


def test_error_text_quoting_the_event_is_cut() -> None:
    with pytest.raises(ValidationError) as caught:
        AnswerEvent.model_validate({**BAD, "answer": 7, "question": {"q": EVIDENCE}})
    error = f"cannot parse: {caught.value}"
    assert "input_value=" in error
    fields = render(line_logger(), "dead_letter", error=error, reason="invalid_event")
    assert EVIDENCE not in fields["error"]
    assert "input_value=<cut>" in fields["error"]
    assert fields["reason"] == "invalid_event"


def test_exception_tracebacks_keep_frames_but_not_quoted_evidence() -> None:
    log = line_logger()
    try:
        try:
            raise KeyError(EVIDENCE)
        except KeyError as inner:
            raise RuntimeError(f"claim check failed on {EVIDENCE!r}") from inner
    except RuntimeError:
        line = log.exception("judge_failed")
    fields = json.loads(line)
    assert EVIDENCE not in line
    assert "exc_info" not in fields
    exception = fields["exception"]
    assert "test_exception_tracebacks_keep_frames_but_not_quoted_evidence" in exception
    assert f"KeyError: '{CUT}'" in exception
    assert f"RuntimeError: claim check failed on '{CUT}'" in exception


def test_stdlib_records_through_the_formatter_chain_are_redacted_too() -> None:
    """aiokafka's lines reach structlog through ``ProcessorFormatter``'s foreign chain,
    where ``configure_logging`` puts the same processors."""
    settings = Settings()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=answer_processors(log_texts=settings.audit.log_texts),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    logger = logging.getLogger("tests.telemetry.foreign")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(f"bad value {EVIDENCE!r}")
        except ValueError:
            logger.exception("fetch failed")
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert "fetch failed" in line
    assert f"ValueError: bad value '{CUT}'" in json.loads(line)["exception"]
    assert EVIDENCE not in line


def test_input_values_are_cut_whatever_they_hold() -> None:
    text = (
        "1 validation error\nanswer\n  Input should be a valid string "
        "[type=string_type, input_value='a ] b, input_type= c', input_type=dict]\n"
        "next line input_value={'x': 'ab'}"
    )
    assert scrub_error_text(text) == (
        "1 validation error\nanswer\n  Input should be a valid string "
        "[type=string_type, input_value=<cut>, input_type=dict]\n"
        "next line input_value=<cut>"
    )


def test_long_error_text_is_cut_to_the_limit() -> None:
    cut = scrub_error_text("x" * 1000, limit=50)
    assert cut == "x" * 50 + "... [950 chars cut]"
    assert scrub_error_text("KeyError: 'answer_id'") == "KeyError: 'answer_id'"


def test_bound_answer_names_every_line_inside_it() -> None:
    log = line_logger()
    with bound_answer(answer_id="a1", trace_id="t" * 32, span_id="s" * 16, partition=2, offset=9):
        inside = render(log, "verdict")
        with bound_answer(answer_id="a2"):
            nested = render(log, "verdict")
        explicit = render(log, "verdict", offset=10)
    outside = render(log, "verdict")
    assert {k: inside[k] for k in ("answer_id", "trace_id", "span_id", "partition", "offset")} == {
        "answer_id": "a1",
        "trace_id": "t" * 32,
        "span_id": "s" * 16,
        "partition": 2,
        "offset": 9,
    }
    assert nested["answer_id"] == "a2" and nested["partition"] == 2
    assert explicit["offset"] == 10
    assert not {"answer_id", "trace_id", "partition"} & outside.keys()
    assert current_answer_fields() == {}


async def test_concurrent_tasks_keep_their_own_answer() -> None:
    async def one(answer_id: str) -> dict[str, str | int]:
        with bound_answer(answer_id=answer_id):
            await asyncio.sleep(0.01)
            return current_answer_fields()

    first, second = await asyncio.gather(one("a1"), one("a2"))
    assert first == {"answer_id": "a1"} and second == {"answer_id": "a2"}


def test_current_span_ids_are_the_fallback(otel: Otel) -> None:
    with otel.telemetry.tracer.start_as_current_span("work") as span:
        fields = add_answer_context(None, "info", {"event": "x"})
    context = span.get_span_context()
    assert fields["trace_id"] == trace.format_trace_id(context.trace_id)
    assert fields["span_id"] == trace.format_span_id(context.span_id)
    assert "trace_id" not in add_answer_context(None, "info", {"event": "x"})
