"""Turning raw input bytes into an :class:`AnswerEvent`, or a dead letter saying why not.

Pure functions, so every way an event can be bad is unit-tested without a broker. The
dead letter itself is built by :mod:`~streamproc.verdicts.dead_letter`, as every
loop's is.

Intake is where hostile input stops. It reads the wire format as I-JSON (RFC 7493), the
strict profile of JSON meant for protocols: UTF-8 without a byte order mark, no
duplicate member names, no NaN or Infinity, numbers a double can hold, no lone
surrogates. On top of that: no U+0000 (it truncates text in C libraries and databases
downstream), at most :data:`MAX_DEPTH` levels of nesting, the schema's caps on list
lengths, and, when asked, an event time near the clock. Whatever passes can
be judged, serialised and aggregated without surprises later; whatever does not becomes a
dead letter with the reason and the original bytes. :func:`parse_answer` never raises.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any, TypeAlias

from pydantic import ValidationError

from streamproc.contracts.events import AnswerEvent, DeadLetterReason
from streamproc.verdicts.dead_letter import Rejection

__all__ = ["MAX_DEPTH", "parse_answer"]

MAX_DEPTH = 64
"""Most nested arrays/objects in one event; the judge walks record ``fields`` recursively."""

_MAX_ERROR_CHARS = 2000
_MAX_LISTED_ERRORS = 20
_MAX_INT_DIGITS = 309  # a double tops out near 1.8e308: longer integers cannot be one
_BOM = b"\xef\xbb\xbf"
_JSON_WHITESPACE = b" \t\r\n"
# Without a \u escape no string can hold U+0000 or a surrogate: the UTF-8 decoding below
# refuses encoded surrogates and the JSON parser refuses raw control characters. So the
# per-string check runs only when the raw text has such an escape (false alarms such as
# "\\ud800" only cost the check).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# In JSON that parsed, every quote outside a string opens one, so this finds every string
# literal in one linear pass (never run it on text the parser refused: there it can be
# quadratic).
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_AS_PARENS = str.maketrans("[{]}", "(())")
_FORBIDDEN_CHAR = re.compile("[\x00\ud800-\udfff]")

_Path: TypeAlias = "tuple[_Path, str | int] | None"
"""A value's place in the document: its parent's path and its key or index."""


class _Refused(Exception):
    """Raised inside the JSON parser's hooks to stop at the first hostile value."""

    def __init__(self, reason: DeadLetterReason, detail: str) -> None:
        super().__init__(detail)
        self.rejection = Rejection(reason, detail)


def parse_answer(
    raw: bytes | None,
    max_bytes: int,
    *,
    now: datetime | None = None,
    max_future_s: float | None = None,
    max_past_s: float | None = None,
) -> AnswerEvent | Rejection:
    """Validate one input message; never raises, whatever the bytes.

    ``max_future_s`` / ``max_past_s`` bound ``occurred_at`` against ``now`` (an aware
    datetime, default the clock); None skips that check. An event outside them would open
    or revise a window nobody will read, so it is a dead letter instead.

    Strings with a lone surrogate or U+0000 are rejected, not repaired: the dead letter
    and any verdict are an audit record of exactly what the model saw, and a repaired
    text would be a text nobody sent.
    """
    try:
        parsed = _parse(raw, max_bytes)
        if isinstance(parsed, Rejection) or (max_future_s is None and max_past_s is None):
            return parsed
        return _check_event_time(parsed, now or datetime.now(UTC), max_future_s, max_past_s)
    except _Refused as refused:
        return refused.rejection
    except RecursionError:
        return Rejection(DeadLetterReason.BAD_JSON, "not valid JSON: nested too deeply to parse")
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug here must cost one dead letter, never the partition
        return Rejection(DeadLetterReason.PROCESSING_ERROR, f"intake failed: {_describe(exc)}")


# ------------------------------------------------------------------------ the steps


def _parse(raw: bytes | None, max_bytes: int) -> AnswerEvent | Rejection:
    if raw is None:
        return Rejection(DeadLetterReason.BAD_JSON, "empty message (tombstone)")
    if len(raw) > max_bytes:
        return Rejection(
            DeadLetterReason.OVERSIZED, f"{len(raw)} bytes is over the limit of {max_bytes}"
        )
    if not raw.strip(_JSON_WHITESPACE):
        return Rejection(DeadLetterReason.BAD_JSON, f"empty message ({len(raw)} bytes, no JSON)")
    if raw.startswith(_BOM):
        return Rejection(
            DeadLetterReason.BAD_JSON, "starts with a byte order mark; send UTF-8 without one"
        )
    try:
        text = bytes(raw).decode("utf-8")  # strict: no surrogates, no UTF-16 guessing
    except UnicodeDecodeError as exc:
        return Rejection(
            DeadLetterReason.BAD_JSON,
            f"not valid UTF-8: {exc.reason} at byte {exc.start} ({raw[exc.start : exc.end]!r})",
        )
    try:
        document = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as exc:
        return Rejection(DeadLetterReason.BAD_JSON, f"not valid JSON: {exc}")
    if not isinstance(document, dict):
        return Rejection(
            DeadLetterReason.SCHEMA_VIOLATION,
            f"expected a JSON object, got {_json_type(document)}",
        )
    # Fast checks over the whole text first (depth before the re-serialising character
    # check, which recurses); the walk that names the place runs only on a hit.
    suspect = _SUSPECT_ESCAPE.search(text) is not None
    too_deep = _deeper_than(text, MAX_DEPTH)
    if too_deep or (suspect and _has_forbidden_char(document)):
        problem = _shape_problem(document, check_strings=suspect)
        if problem is not None:
            return Rejection(DeadLetterReason.SCHEMA_VIOLATION, problem)
    try:
        return AnswerEvent.model_validate(document)
    except ValidationError as exc:
        return Rejection(DeadLetterReason.SCHEMA_VIOLATION, _summarise(exc))


def _check_event_time(
    event: AnswerEvent, now: datetime, max_future_s: float | None, max_past_s: float | None
) -> AnswerEvent | Rejection:
    ahead_s = (event.occurred_at - now).total_seconds()
    stamp = event.occurred_at.isoformat()
    if max_future_s is not None and ahead_s > max_future_s:
        return Rejection(
            DeadLetterReason.EVENT_TIME_OUT_OF_RANGE,
            f"occurred_at {stamp} is {ahead_s:.0f} s ahead of the clock ({now.isoformat()}); "
            f"at most {max_future_s:g} s allowed",
        )
    if max_past_s is not None and -ahead_s > max_past_s:
        return Rejection(
            DeadLetterReason.EVENT_TIME_OUT_OF_RANGE,
            f"occurred_at {stamp} is {-ahead_s:.0f} s behind the clock ({now.isoformat()}); "
            f"at most {max_past_s:g} s allowed",
        )
    return event


# ------------------------------------------------------------ JSON parser hooks (I-JSON)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object; a repeated name is refused, since readers disagree on which one wins
    and the audit trail must mean one thing."""
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _Refused(
                    DeadLetterReason.SCHEMA_VIOLATION,
                    f"duplicate key {_quote(name)} in one JSON object",
                )
            seen.add(name)
    return members


def _refuse_constant(name: str) -> float:
    raise _Refused(DeadLetterReason.BAD_JSON, f"not valid JSON: {name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(
            DeadLetterReason.SCHEMA_VIOLATION,
            f"number {_clip(literal)} is out of the range of a double",
        )
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        raise _Refused(
            DeadLetterReason.SCHEMA_VIOLATION,
            f"integer of {len(literal.lstrip('-'))} digits is out of the range of a double",
        )
    return int(literal)


# -------------------------------------------------------------------- document shape


def _deeper_than(text: str, limit: int) -> bool:
    """Whether JSON ``text`` (one the parser accepted) nests deeper than ``limit``.

    At C speed: blank the strings, keep the brackets as "(" and ")", and peel off the
    innermost pairs once per level; whatever is left after ``limit`` peels is deeper.
    """
    nested = _NOT_BRACKET.sub("", _STRING_LITERAL.sub("", text)).translate(_AS_PARENS)
    for level in range(limit):
        if len(nested) <= 2 * (limit - level):  # too few brackets left to be deeper
            return False
        peeled = nested.replace("()", "")
        if len(peeled) == len(nested):  # unbalanced: cannot happen after json.loads
            return False
        nested = peeled
    return bool(nested)


def _has_forbidden_char(document: dict[str, Any]) -> bool:
    """Whether any string or key holds a lone surrogate or U+0000, in one C-speed pass:
    dumped without ASCII escaping, a lone surrogate cannot be encoded and U+0000 shows as
    its escape (a literal backslash-u0000 is a false alarm the walk then clears)."""
    dumped = json.dumps(document, ensure_ascii=False)
    try:
        dumped.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return "\\u0000" in dumped


def _shape_problem(document: dict[str, Any], *, check_strings: bool) -> str | None:
    """The first nesting or character problem, named by its path.

    One pass over the containers, no recursion; a value's path is kept as a link to its
    parent's and only spelled out for the message.
    """
    stack: list[tuple[dict[str, Any] | list[Any], int, _Path]] = [(document, 1, None)]
    while stack:
        container, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            return f"{_spell(path)}: nested deeper than {MAX_DEPTH} levels"
        members = container.items() if isinstance(container, dict) else enumerate(container)
        for key, inner in members:
            if isinstance(inner, dict | list):
                stack.append((inner, depth + 1, (path, key)))
            elif check_strings:
                if isinstance(key, str) and (problem := _forbidden_char(key)) is not None:
                    return f"{_spell((path, key))} (the key): {problem}"
                if isinstance(inner, str) and (problem := _forbidden_char(inner)) is not None:
                    return f"{_spell((path, key))}: {problem}"
    return None


def _forbidden_char(text: str) -> str | None:
    found = _FORBIDDEN_CHAR.search(text)
    if found is None:
        return None
    char = found.group()
    name = "U+0000 (NUL)" if char == "\x00" else f"lone surrogate U+{ord(char):04X}"
    return f"{name} at character {found.start()}"


def _spell(path: _Path) -> str:
    keys: list[str] = []
    while path is not None:
        path, key = path
        keys.append(_clip(str(key)))
    return _clip(".".join(reversed(keys)), 200) or "<root>"


# ------------------------------------------------------------------------- wording


def _summarise(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:_MAX_LISTED_ERRORS]:
        location = ".".join(_clip(str(item)) for item in error["loc"]) or "<root>"
        parts.append(f"{location}: {error['msg']}")
    more = exc.error_count() - len(parts)
    tail = f"; and {more} more" if more > 0 else ""
    return f"{exc.error_count()} schema error(s): " + "; ".join(parts) + tail


def _json_type(value: object) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    return names.get(type(value), type(value).__name__)


def _clip(text: str, limit: int = 60) -> str:
    """Short and always encodable, for error messages that quote the input."""
    safe = _encodable(text)
    return safe if len(safe) <= limit else safe[:limit] + "..."


def _quote(text: str) -> str:
    return "'" + _clip(text) + "'"


def _encodable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry (lone surrogates) written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe(exc: BaseException) -> str:
    try:
        return _clip(f"{type(exc).__name__}: {exc}", _MAX_ERROR_CHARS)
    except Exception:  # noqa: BLE001 - an exception whose message itself fails still gets named
        return type(exc).__name__
