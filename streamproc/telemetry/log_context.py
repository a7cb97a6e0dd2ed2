"""structlog processors: which answer a log line is about, and what it must not say.

- :func:`bound_answer` binds ``answer_id``, ``trace_id``, ``span_id``, ``partition`` and
  ``offset`` for the lines logged inside it (a ``ContextVar``, so concurrent tasks do not
  mix; note that ``loop.run_in_executor`` does not carry context into the thread, while
  ``asyncio.to_thread`` and ``contextvars.copy_context().run`` do). :func:`add_answer_context`
  puts them on each line, and falls back to the current OpenTelemetry span's ids.
- :class:`RedactTexts` keeps evidence, question and answer text out of logs unless
  ``audit.log_texts`` allows them: text-bearing fields and event models are replaced by a
  placeholder, and error / exception text, which can quote the event (pydantic puts the
  offending ``input_value`` in its messages), is cut.

:mod:`~streamproc.telemetry.logging` adds these with :func:`answer_processors` to the
shared processor chain (after ``merge_contextvars``, before the renderer), so they see
structlog's own lines and the stdlib ones (aiokafka) alike.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from opentelemetry import trace
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = [
    "ERROR_KEYS",
    "TEXT_KEYS",
    "RedactTexts",
    "add_answer_context",
    "answer_processors",
    "bound_answer",
    "current_answer_fields",
    "scrub_error_text",
]

TEXT_KEYS: Final = frozenset(
    {
        "answer",
        "answer_text",
        "body",
        "claim",
        "claim_text",
        "claims",
        "evidence",
        "evidence_text",
        "hypothesis",
        "payload",
        "premise",
        "question",
        "question_text",
        "raw",
        "sentence",
        "sentences",
        "text",
        "texts",
        "trim_sentences",
        "value",
        "value_b64",
    }
)
"""Field names whose text (strings, bytes, containers) is withheld; numbers and flags
under these names (``claims=3``) are kept."""

ERROR_KEYS: Final = frozenset({"error", "exception", "detail", "exc"})
"""Fields holding error text: kept, but scrubbed and cut by :func:`scrub_error_text`."""

REDACTED: Final = "[redacted]"
_EVENT_MODULE = "streamproc.contracts.events"
_MAX_ERROR_CHARS = 300
_MAX_QUOTED_CHARS = 32
_MAX_CHAIN = 5
_MAX_DEPTH = 3
# pydantic: "[type=..., input_value=<repr, one line>, input_type=...]"; without the
# input_type, to the end of the line. Greedy: the value itself may hold ", input_type=".
_INPUT_VALUE = re.compile(r"input_value=(?:.*(?=, input_type=)|.*)")
_LONG = f"{{{_MAX_QUOTED_CHARS + 1},}}"
_QUOTED = re.compile(rf"'(?:[^'\\\n]|\\.){_LONG}'|\"(?:[^\"\\\n]|\\.){_LONG}\"")

_ANSWER: ContextVar[Mapping[str, str | int] | None] = ContextVar(
    "streamproc_answer_log_fields", default=None
)


# --- which answer -------------------------------------------------------------------------


@contextmanager
def bound_answer(
    *,
    answer_id: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> Iterator[None]:
    """Bind these fields to every line logged inside the block (None: not bound). Blocks
    nest; the inner values win. ``MessageTrace.log_fields()`` gives them all."""
    given = {
        "answer_id": answer_id,
        "trace_id": trace_id,
        "span_id": span_id,
        "partition": partition,
        "offset": offset,
    }
    fields = {**(_ANSWER.get() or {}), **{k: v for k, v in given.items() if v is not None}}
    token = _ANSWER.set(fields)
    try:
        yield
    finally:
        _ANSWER.reset(token)


def current_answer_fields() -> dict[str, str | int]:
    """The fields bound by the innermost :func:`bound_answer` (empty outside any)."""
    return dict(_ANSWER.get() or {})


def add_answer_context(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Processor: the bound answer fields (explicit keywords of the call win), else the
    trace and span id of the current OpenTelemetry span, if any."""
    bound = _ANSWER.get()
    if bound:
        for key, value in bound.items():
            event_dict.setdefault(key, value)
    if "trace_id" not in event_dict:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            event_dict["trace_id"] = trace.format_trace_id(span_context.trace_id)
            event_dict.setdefault("span_id", trace.format_span_id(span_context.span_id))
    return event_dict


# --- what must not be said ----------------------------------------------------------------


class RedactTexts:
    """Processor: withhold texts and cut error text (see the module doc). With
    ``log_texts`` everything passes unchanged."""

    def __init__(self, *, log_texts: bool = False, max_error_chars: int = _MAX_ERROR_CHARS):
        self.log_texts = log_texts
        self.max_error_chars = max_error_chars

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        if self.log_texts:
            return event_dict
        exc_info = event_dict.pop("exc_info", None)
        for key, value in event_dict.items():
            event_dict[key] = self._clean(key, value, 0)
        if exc_info:
            error = _exception_of(exc_info)
            if error is not None:
                event_dict["exception"] = self._traceback(error)
        return event_dict

    def _clean(self, key: str, value: Any, depth: int) -> Any:
        name = key.lower()
        if name in ERROR_KEYS and isinstance(value, str | BaseException):
            return scrub_error_text(str(value), self.max_error_chars)
        if _is_event_model(value):
            return f"<{type(value).__name__}: {REDACTED}>"
        if name in TEXT_KEYS and not _is_scalar(value):
            return REDACTED
        if depth < _MAX_DEPTH:
            if isinstance(value, Mapping):
                return {k: self._clean(str(k), v, depth + 1) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [self._clean(key, v, depth + 1) for v in value]
        return value

    def _traceback(self, error: BaseException) -> str:
        """Frames (code locations and source lines, no data) of the exception chain, each
        exception's message scrubbed and cut."""
        chain: list[BaseException] = []
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen and len(chain) < _MAX_CHAIN:
            seen.add(id(current))
            chain.append(current)
            current = current.__cause__ or (
                None if current.__suppress_context__ else current.__context__
            )
        parts: list[str] = []
        for exc in reversed(chain):
            frames = "".join(traceback.format_tb(exc.__traceback__))
            message = scrub_error_text(str(exc), self.max_error_chars)
            parts.append(
                f"Traceback (most recent call last):\n{frames}{type(exc).__qualname__}: {message}"
            )
        return "\n\nDuring handling, or as the cause of the above:\n\n".join(parts)


def scrub_error_text(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    """Error text without what could quote the event: pydantic's ``input_value=...``
    and quoted strings longer than an identifier, then cut to ``limit`` characters."""
    text = _INPUT_VALUE.sub("input_value=<cut>", text)
    text = _QUOTED.sub(
        lambda m: f"{m.group(0)[0]}<{len(m.group(0)) - 2} chars cut>{m.group(0)[0]}", text
    )
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} chars cut]"
    return text


def answer_processors(*, log_texts: bool) -> list[Processor]:
    """The processors ``configure_logging`` inserts into its shared chain, after
    ``merge_contextvars`` and before the renderer: bind the answer's ids to each line,
    then cut texts unless ``log_texts`` (``audit.log_texts``)."""
    return [add_answer_context, RedactTexts(log_texts=log_texts)]


def _exception_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        error = exc_info[1]
        return error if isinstance(error, BaseException) else None
    if exc_info is True:
        return sys.exc_info()[1]
    return None


def _is_event_model(value: object) -> bool:
    return type(value).__module__ == _EVENT_MODULE and hasattr(value, "model_dump")


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, bool | int | float)
