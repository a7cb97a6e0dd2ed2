"""Fitting one output record under its topic's ``max.message.bytes``.

The broker refuses a record over the limit, and inside a transaction that refusal would
abort the whole batch, so the judging stage checks sizes before anything is sent. A
verdict too large is degraded on purpose (per-claim signals dropped, then the least
severe claims left out, with an ``OUTPUT_TRIMMED`` note in ``judgement.limits``); what
still does not fit is reported as :class:`TooLarge` for the caller to dead-letter. A
dead letter is shrunk until it fits, since it is the last resort.

Pure functions: models in, :class:`Fitted` (the model as published and its bytes) out.
Each is a :data:`Fitter`, the form an output topic
(:class:`~streamproc.verdicts.output_topic.OutputTopic`) takes its fitting in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from pydantic import BaseModel

from streamproc.contracts.events import ClaimVerdict, DeadLetter, Verdict, VerdictLabel

__all__ = [
    "OVERHEAD_BYTES",
    "Fitted",
    "Fitter",
    "TooLarge",
    "encode",
    "fit_dead_letter",
    "fit_record",
    "fit_verdict",
    "fits",
]

M = TypeVar("M", bound=BaseModel)

OVERHEAD_BYTES = 1024
"""Kept free under the topic limit for record headers (trace context) and batch framing."""

_SEVERITY = {VerdictLabel.CONTRADICTED: 0, VerdictLabel.UNSUPPORTED: 1}


@dataclass(frozen=True, slots=True)
class TooLarge:
    """An output that does not fit even after degrading it."""

    detail: str


@dataclass(frozen=True, slots=True)
class Fitted(Generic[M]):
    """A model as it will be published (a verdict possibly trimmed, a dead letter possibly
    shrunk) and its bytes."""

    model: M
    value: bytes


Fitter: TypeAlias = Callable[[M, bytes | None, int], Fitted[M] | TooLarge]
"""``(model, key, max_bytes) -> Fitted | TooLarge``: how one topic's records are made to fit."""


def encode(model: BaseModel) -> bytes:
    """The wire form of every output model (UTF-8 JSON)."""
    return model.model_dump_json().encode()


def fits(key: bytes | None, value: bytes, max_bytes: int) -> bool:
    """Whether key and value leave :data:`OVERHEAD_BYTES` free under ``max_bytes``."""
    return len(key or b"") + len(value) + OVERHEAD_BYTES <= max_bytes


def fit_record(model: M, key: bytes | None, max_bytes: int) -> Fitted[M] | TooLarge:
    """A record that cannot be degraded (flag, outcome, aggregate...) as it is, or why not."""
    value = encode(model)
    if fits(key, value, max_bytes):
        return Fitted(model, value)
    return TooLarge(_too_large(type(model).__name__.lower(), key, value, max_bytes))


def fit_verdict(verdict: Verdict, key: bytes | None, max_bytes: int) -> Fitted[Verdict] | TooLarge:
    """The verdict whole if it fits; else without per-claim signals; else with as many
    claims as fit, most severe first (contradicted, unsupported, then the rest in answer
    order), listed in answer order. The judgement's counts still describe the whole
    answer; ``limits`` says what was left out."""
    value = encode(verdict)
    if fits(key, value, max_bytes):
        return Fitted(verdict, value)

    claims = verdict.judgement.claims
    had_signals = any(claim.signals for claim in claims)
    slim = [claim.model_copy(update={"signals": {}}) for claim in claims] if had_signals else claims
    notes = ["signals dropped"] if had_signals else []
    if had_signals:
        candidate = _trimmed(verdict, slim, notes)
        value = encode(candidate)
        if fits(key, value, max_bytes):
            return Fitted(candidate, value)

    by_severity = sorted(range(len(slim)), key=lambda i: (_rank(slim[i]), i))

    def attempt(kept: int) -> tuple[Verdict, bytes]:
        chosen = sorted(by_severity[:kept])
        omitted = f"{len(slim) - kept} of {len(slim)} claims omitted"
        candidate = _trimmed(verdict, [slim[i] for i in chosen], [*notes, omitted])
        return candidate, encode(candidate)

    best = attempt(0)
    if not fits(key, best[1], max_bytes):
        return TooLarge(
            _too_large("verdict", key, best[1], max_bytes) + " even with every claim omitted"
        )
    # Size grows with the claims kept: find the most that fit (all of them did not).
    low, high = 0, len(slim) - 1
    while low < high:
        middle = (low + high + 1) // 2
        tried = attempt(middle)
        if fits(key, tried[1], max_bytes):
            low, best = middle, tried
        else:
            high = middle - 1
    return Fitted(best[0], best[1])


def fit_dead_letter(letter: DeadLetter, key: bytes | None, max_bytes: int) -> Fitted[DeadLetter]:
    """The dead letter whole if it fits, else without the original value, else without
    the original key too. It is the last resort, so it always comes back; the original
    value was already capped by ``max_event_bytes``, so shrinking is rare."""
    value = encode(letter)
    if fits(key, value, max_bytes):
        return Fitted(letter, value)
    size = len(letter.value_b64)
    letter = letter.model_copy(
        update={
            "value_b64": "",
            "error": f"{letter.error} [original value left out: {size} base64 characters "
            f"would exceed the dead-letter topic's limit of {max_bytes} bytes]",
        }
    )
    value = encode(letter)
    if fits(key, value, max_bytes) or letter.key_b64 is None:
        return Fitted(letter, value)
    letter = letter.model_copy(
        update={"key_b64": None, "error": f"{letter.error} [original key left out too]"}
    )
    return Fitted(letter, encode(letter))


def _rank(claim: ClaimVerdict) -> int:
    return 2 if claim.verdict is None else _SEVERITY.get(claim.verdict, 2)


def _trimmed(verdict: Verdict, claims: list[ClaimVerdict], notes: list[str]) -> Verdict:
    judgement = verdict.judgement
    note = "OUTPUT_TRIMMED: " + "; ".join(notes)
    trimmed = judgement.model_copy(update={"claims": claims, "limits": [*judgement.limits, note]})
    return verdict.model_copy(update={"judgement": trimmed})


def _too_large(kind: str, key: bytes | None, value: bytes, max_bytes: int) -> str:
    size = len(key or b"") + len(value)
    return (
        f"{kind} of {size} bytes does not fit the topic's limit of {max_bytes} bytes "
        f"({OVERHEAD_BYTES} kept for headers)"
    )
