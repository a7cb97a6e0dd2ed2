"""One streamed answer, checked sentence by sentence; no WebSocket here.

A sentence is checked once it is complete (:mod:`~streamproc.gate.stream_sentences`):
the answer up to and including it is decided by the gate's service like any request
(admission, micro-batches, the budget from the sentence's completion, the cheap checks
when the model cannot finish in time, the tenant's policy), but unmonitored - no span,
no record. Its claims are read off that judgement: the sentences before it are the
context it is checked against ("It was delivered" refers back), and their pairs are
already in the model's cache, so each check costs about its own sentence. Sentences
that complete while a check runs are checked together, by the next one.

At the end the whole answer is decided once more, monitored, exactly as ``/v1/check``
decides it with the same budget: that is the final, and the answer's verdict, audit
record and span (one child span per sentence) come from it alone. A sentence released
earlier that the final does not keep is listed as withdrawn.

A sentence is held when the judgement refutes it (withhold, or trimmed), or when it was
not checked in time and the tenant's policy is fail-closed; otherwise released
(``verified: false`` when not checked in time under fail-open).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamproc.contracts.events import Action, AnswerEvent, AnswerJudgement, VerdictLabel
from streamproc.contracts.gate_events import FailurePolicy
from streamproc.contracts.gate_stream_events import SentenceDecision, StreamFinal, StreamSentence
from streamproc.gate.request import GateRequest, GateResult
from streamproc.gate.service import GateService
from streamproc.gate.stream_sentences import SentenceStream, StreamedSentence
from streamproc.gate.tracing import DecisionTracing, PassThroughTracing, SentenceCheck
from streamproc.verdicts.dead_letter import Rejection

__all__ = ["AnswerStream", "StreamTooLarge", "sentence_decision"]

_UNCHECKED = (None, VerdictLabel.UNVERIFIED)


class StreamTooLarge(ValueError):
    """The answer would take its event past the intake limit."""


@dataclass(slots=True)
class _Unchecked:
    sentence: StreamedSentence
    complete: float


class AnswerStream:
    """Feed deltas (:meth:`add`), check what they complete (:meth:`check`), end once
    (:meth:`final`). ``request`` is the start: its event (answer: the first piece, or "")
    and budget, already through the intake and the caller's tenant rules."""

    def __init__(
        self,
        service: GateService,
        request: GateRequest,
        event: dict[str, Any],
        *,
        policy: FailurePolicy,
        max_bytes: int,
        tracing: DecisionTracing | None = None,
    ) -> None:
        self._service = service
        self._start = request
        self._event = event
        self._policy = policy
        self._tracing = tracing or PassThroughTracing()
        self._sentences = SentenceStream()
        self._waiting: list[_Unchecked] = []
        self._released: dict[int, str] = {}  # index -> text of each sentence released
        self._checks: list[SentenceCheck] = []
        self._bytes = len(request.body)
        self._max_bytes = max_bytes
        self._ended = False
        if request.answer.answer:
            self.add(request.answer.answer, now=request.arrived)

    @property
    def text(self) -> str:
        """The answer so far."""
        return self._sentences.text

    @property
    def pending(self) -> int:
        """Complete sentences not checked yet."""
        return len(self._waiting)

    def add(self, delta: str, *, now: float | None = None) -> int:
        """Take ``delta``; how many sentences it completed. :class:`StreamTooLarge` when
        the whole event would pass the intake limit (JSON-escaped, as it will be sent)."""
        size = len(json.dumps(delta, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2
        if self._bytes + size > self._max_bytes:
            raise StreamTooLarge(
                f"the answer takes its event past the intake limit of {self._max_bytes} bytes"
            )
        self._bytes += size
        done = self._sentences.feed(delta)
        stamp = time.monotonic() if now is None else now
        self._waiting += [_Unchecked(sentence, stamp) for sentence in done]
        return len(done)

    async def check(self) -> list[StreamSentence]:
        """Check the complete sentences not checked yet, in one decision of the answer up
        to the last of them; [] when there are none."""
        if not self._waiting:
            return []
        waiting, self._waiting = self._waiting, []
        upto = waiting[-1].sentence.end
        prefix = self._start.answer.model_copy(update={"answer": self.text[:upto]})
        request = _derived(self._start, prefix, arrived=waiting[0].complete, monitored=False)
        result = await self._service.check(request)
        return self._decide(waiting, result)

    async def final(self) -> tuple[list[StreamSentence], StreamFinal, GateResult] | Rejection:
        """End the answer: its last sentences and the final, from one monitored decision
        of the whole answer (as ``/v1/check`` makes it); the intake's rejection when the
        whole event fails it (then nothing is monitored)."""
        if self._ended:
            raise RuntimeError("the stream's final was made already")
        self._ended = True
        ended = time.monotonic()
        self._waiting += [_Unchecked(s, ended) for s in self._sentences.end()]
        body = json.dumps({**self._event, "answer": self.text}, ensure_ascii=False).encode()
        whole = self._service.parse(body)
        if isinstance(whole, Rejection):
            return whole
        request = _derived(self._start, whole, arrived=ended, monitored=True, body=body)
        result = await self._service.check(request)
        last = self._decide(self._waiting, result)
        self._waiting = []
        reply = result.reply
        kept = _kept(reply.answer_text, reply.decision, self._released)
        final = StreamFinal(
            decision=reply.decision,
            verified=reply.verified,
            reason=reply.reason,
            answer_text=reply.answer_text,
            verdict=reply.verdict,
            latency_ms=max(0.0, (time.monotonic() - ended) * 1000),
            budget_ms=reply.budget_ms,
            policy=reply.policy,
            withdrawn=sorted(i for i in self._released if i not in kept),
        )
        self._tracing.sentences(result.trace_headers, self._checks)
        return last, final, result

    def _decide(self, waiting: Sequence[_Unchecked], result: GateResult) -> list[StreamSentence]:
        judgement = result.reply.verdict.judgement
        out: list[StreamSentence] = []
        now = time.monotonic()
        for item in waiting:
            sentence = item.sentence
            claims = [c for c in judgement.claims if c.sentence_index == sentence.index]
            verified = judgement.verified or (
                bool(claims) and all(c.verdict not in _UNCHECKED for c in claims)
            )
            decision = sentence_decision(
                judgement, sentence.text, verified=verified, policy=self._policy
            )
            out.append(
                StreamSentence(
                    index=sentence.index,
                    text=sentence.text,
                    decision=decision,
                    verified=verified,
                    reason=None if verified else judgement.unverified_reason,
                    claims=claims,
                    latency_ms=max(0.0, (now - item.complete) * 1000),
                )
            )
            if decision == "release":
                self._released[sentence.index] = sentence.text
            self._checks.append(
                SentenceCheck(sentence.index, item.complete, now, decision, verified)
            )
        return out


def sentence_decision(
    judgement: AnswerJudgement, text: str, *, verified: bool, policy: FailurePolicy
) -> SentenceDecision:
    """Release or hold one sentence, given the judgement of the answer up to it."""
    if judgement.action is Action.WITHHOLD:
        return "hold"
    if judgement.action is Action.TRIM and text in judgement.trim_sentences:
        return "hold"
    if verified or policy == "fail-open":
        return "release"
    return "hold"


def _kept(answer_text: str, action: Action, released: dict[int, str]) -> set[int]:
    """The released sentences the final's text still holds."""
    if action is Action.WITHHOLD or not answer_text:
        return set()
    kept: set[int] = set()
    position = 0
    for index in sorted(released):
        found = answer_text.find(released[index], position)
        if found >= 0:
            kept.add(index)
            position = found + len(released[index])
    return kept


def _derived(
    start: GateRequest,
    answer: AnswerEvent,
    *,
    arrived: float,
    monitored: bool,
    body: bytes | None = None,
) -> GateRequest:
    return GateRequest(
        body=start.body if body is None else body,
        answer=answer,
        budget_ms=start.budget_ms,
        arrived=arrived,
        origin=start.origin,
        headers=start.headers,
        trace_id=start.trace_id,
        traceparent=start.traceparent,
        notes=start.notes,
        monitored=monitored,
        span_from=start.arrived if monitored else None,
    )
