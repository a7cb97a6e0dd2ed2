"""The gate's service: one request in, a decision out within the request's budget.

How a request goes (:meth:`GateService.check`):

1. Admission. A request joins the queue only if it can be judged in time: the expected
   finish (the rest of the batch being judged plus the queue's batches, from the judge's
   learnt cost per work unit - a body's size counts, :mod:`~streamproc.gate.admission`)
   must fit in ``budget - elapsed - settle_reserve_ms``, and fewer than ``batch_max *
   max_pending_factor`` requests may be held. Otherwise it is shed at once -
   ``not_checked(OVERLOADED)``, decided by policy, never queued - so memory stays bounded
   and a request is never answered late because of the ones before it. An idle gate
   always admits a one-unit request (nothing else to learn the judge's cost from), so it
   recovers as soon as load drops; a larger one only if its own judging fits.
2. Judging. One task drains the queue into micro-batches of up to ``batch_max`` answers
   and, past the first, ``batch_max`` work units (a large body is judged alone), each one
   judge call in the judge thread (a ``ThreadPoolExecutor`` of one, off the event loop),
   with the stage's isolation (a poison answer is judged alone and fails alone:
   ``stream.judging.stage.judge_answers``). The batch's records are built there too.
3. The budget. The request waits for its judgement until ``budget - settle_reserve_ms``
   after its arrival. Past that it is answered with the cheap checks alone
   (``settle_batch``: token confidence, records, values; the rest ``unverified``,
   ``BUDGET_EXCEEDED``), run in a second small executor so it is not stuck behind the
   batch being judged. The full judgement arriving later is *discarded*: the caller was
   answered already, and what is published must be what it was told.
4. The reply. The failure policy of the answer's tenant turns an unverified judgement
   (budget, overload, judge error, an unsupported language) into pass or withhold
   (:mod:`~streamproc.gate.policy`); the monitored records (verdict, flag, outcome, audit,
   review item) come from the stage's output path for exactly the judgement replied with.

The service never raises from :meth:`check`; a bug in it answers ``JUDGE_ERROR`` by policy.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    JudgeInfo,
    UnverifiedReason,
    Verdict,
)
from streamproc.contracts.gate_events import BUDGET_HEADER, FailurePolicy, GateError, GateReply
from streamproc.gate.admission import Admission, work_units
from streamproc.gate.policy import decide_reply
from streamproc.gate.request import GateRequest, GateResult
from streamproc.gate.sensor import GateSensor, NullGateSensor
from streamproc.gate.tracing import DecisionSpan, DecisionTracing, PassThroughTracing
from streamproc.judge.decision.actions import not_checked
from streamproc.judge.protocols import Judge, SettlesCheaply
from streamproc.verdicts.catalog import OutputTopics
from streamproc.verdicts.dead_letter import Rejection
from streamproc.verdicts.intake import parse_answer
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.stage import (
    IncomingMessage,
    JudgedAnswer,
    StageLimits,
    judge_answers,
    outputs_for,
    verdict_for,
)

__all__ = ["GateService", "GateServiceOptions"]

log = structlog.get_logger(__name__)

_UNTRACED = PassThroughTracing()
_SETTLE_THREADS = 2
_MIN_SETTLE_WAIT_S = 0.001


@dataclass(frozen=True, slots=True)
class GateServiceOptions:
    """What the service is told: the gate's budgets, batching and failure policies
    (``gate.*``) and the verdict stage's limits and output topics. The composition root
    builds it once (:func:`streamproc.wiring.gate_service_options`)."""

    limits: StageLimits
    """The stage's intake limits, judge deadline and audit / review settings."""
    topics: OutputTopics
    batch_max: int
    max_pending_factor: int
    settle_reserve_ms: float
    default_budget_ms: float
    max_budget_ms: float
    publish: bool
    policy: FailurePolicy
    """The failure policy of a tenant without one of its own."""
    policies: Mapping[str, FailurePolicy] = field(default_factory=dict)
    """Per-tenant overrides of ``policy``."""

    def policy_for(self, tenant: str) -> FailurePolicy:
        """The tenant's failure policy: its override, else ``policy``."""
        return self.policies.get(tenant, self.policy)


@dataclass(frozen=True, slots=True)
class _BuiltReply:
    """A judgement with the reply's verdict and the records to publish."""

    judgement: AnswerJudgement
    verdict: Verdict
    records: list[OutboundRecord]
    judge_ms: float | None


@dataclass(slots=True)
class _Waiting:
    """One admitted request, queued or being judged."""

    request: GateRequest
    trace_id: str | None
    headers: OutHeaders
    future: asyncio.Future[_BuiltReply | Rejection | BaseException]
    units: float = 1.0
    """Its work units (:func:`~streamproc.gate.admission.work_units` of its body)."""
    abandoned: bool = False
    """Its caller was answered otherwise (settled at the budget): not worth judging."""


@dataclass(slots=True)
class _Counters:
    """What happened to requests, for tests and the benchmark."""

    judged: int = 0
    settled: int = 0
    shed: int = 0
    errors: int = 0
    max_pending: int = 0
    batches: list[int] = field(default_factory=list)


class GateService:
    """Judges gate requests in micro-batches within their budgets; see the module doc."""

    def __init__(
        self,
        options: GateServiceOptions,
        judge: Judge,
        *,
        sensor: GateSensor | None = None,
        tracing: DecisionTracing | None = None,
    ) -> None:
        """``judge``: in-process (its calls run in the gate's judge thread); one without
        ``settle_batch`` answers a budget overrun with no claim checked at all. Its key in
        the measured-accuracy table, on review items, is in ``options.limits``."""
        self._gate = gate = options
        self._judge = judge
        self._info: JudgeInfo = judge.info
        self._settles = isinstance(judge, SettlesCheaply)
        self._limits = options.limits
        self._topics = options.topics
        self._publish = gate.publish
        self._sensor: GateSensor = sensor or NullGateSensor()
        self._tracing: DecisionTracing = tracing or PassThroughTracing()
        self._reserve_s = gate.settle_reserve_ms / 1000
        self._admission = Admission(gate.batch_max)
        self._capacity = gate.batch_max * gate.max_pending_factor
        self._queue: deque[_Waiting] = deque()
        self._in_flight: list[_Waiting] = []
        self._in_flight_since = 0.0
        self._wake: asyncio.Event | None = None
        self._batcher: asyncio.Task[None] | None = None
        self._judge_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gate-judge")
        self._settle_pool = ThreadPoolExecutor(
            max_workers=_SETTLE_THREADS, thread_name_prefix="gate-settle"
        )
        self._closed = False
        self.counters = _Counters()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> JudgeInfo:
        """Start the batching task; the judge's identity, as audit records carry it."""
        if self._batcher is None:
            # A first call pays for lazy loading (a language model, ONNX sessions): not
            # the first caller's budget.
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._judge_pool, self._warm_up)
            self._wake = asyncio.Event()
            self._batcher = asyncio.create_task(self._run_batches(), name="gate-batcher")
        return self._info

    def _warm_up(self) -> None:
        warm = AnswerEvent(
            event_id="gate-warm-up",
            answer_id="gate-warm-up",
            conversation_id="gate-warm-up",
            tenant="gate-warm-up",
            assistant_id="gate-warm-up",
            model="gate-warm-up",
            occurred_at=datetime.now(UTC),
            question="Is the gate ready to check answers?",
            answer="The gate is ready to check answers against their evidence.",
            evidence=[{"id": "W1", "text": "The gate checks answers against their evidence."}],
        )
        try:
            self._judge.judge_batch([warm])
            if self._settles:
                settling: SettlesCheaply = self._judge  # type: ignore[assignment]
                settling.settle_batch([warm], reason=UnverifiedReason.BUDGET_EXCEEDED)
        except Exception as exc:  # noqa: BLE001 - a judge that fails here fails per request
            log.warning("gate_warm_up_failed", error=repr(exc))

    async def close(self) -> None:
        """Stop batching; requests still waiting are answered by policy (``JUDGE_ERROR``)."""
        self._closed = True
        if self._batcher is not None:
            self._batcher.cancel()
            await asyncio.gather(self._batcher, return_exceptions=True)
        stopped = RuntimeError("the gate is closing")
        for waiting in [*self._in_flight, *self._queue]:
            if not waiting.future.done():
                waiting.future.set_result(stopped)
        self._queue.clear()
        self._in_flight = []
        for pool in (self._judge_pool, self._settle_pool):
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)

    def ready(self) -> bool:
        """Started and not closing: requests are judged."""
        return self._batcher is not None and not self._batcher.done() and not self._closed

    @property
    def max_event_bytes(self) -> int:
        """The intake limit :meth:`parse` applies (``worker.max_event_bytes``)."""
        return self._limits.max_event_bytes

    @property
    def tracing(self) -> DecisionTracing:
        """The decisions' tracing (a streamed answer's sentence spans go through it)."""
        return self._tracing

    def policy_for(self, tenant: str) -> FailurePolicy:
        """The failure policy of ``tenant``'s answers."""
        return self._gate.policy_for(tenant)

    @property
    def pending(self) -> int:
        """Requests held now (queued or being judged)."""
        return len(self._queue) + len(self._in_flight)

    # ------------------------------------------------------------------ input

    def parse(self, body: bytes | None) -> AnswerEvent | Rejection:
        """The answer event of a request body, under the worker's intake limits (size,
        JSON, schema, event-time bounds). Never raises."""
        limits = self._limits
        return parse_answer(
            body,
            limits.max_event_bytes,
            now=datetime.now(UTC),
            max_future_s=limits.event_time_max_future_s,
            max_past_s=limits.event_time_max_past_s,
        )

    def budget(self, header: str | bytes | None) -> float | GateError:
        """The request's budget in ms from its ``X-Budget-Ms`` header: the default when
        absent, a positive finite number else ``bad_budget``, cut to ``max_budget_ms``."""
        if header is None:
            return min(self._gate.default_budget_ms, self._gate.max_budget_ms)
        try:
            text = header.decode("ascii") if isinstance(header, bytes) else header
            value = float(text.strip())
        except (UnicodeDecodeError, ValueError):
            return _bad_budget(header)
        if not math.isfinite(value) or value <= 0:
            return _bad_budget(header)
        return min(value, self._gate.max_budget_ms)

    # ------------------------------------------------------------------ one request

    async def check(self, request: GateRequest) -> GateResult:
        """Decide on ``request`` within its budget; never raises (but lets a cancelled
        caller go)."""
        tracing = self._tracing if request.monitored else _UNTRACED
        span = tracing.start(request)
        policy = self._gate.policy_for(request.answer.tenant)
        try:
            result = await self._decide(request, span, policy)
        except asyncio.CancelledError:
            span.end(None, error=asyncio.CancelledError())
            raise
        except Exception as exc:
            log.exception("gate_check_failed", answer_id=request.answer.answer_id)
            self.counters.errors += 1
            try:
                result = self._reply(request, policy, self._fallback(request, span))
            except Exception as again:
                span.end(None, error=again)
                raise exc from again
        span.end(result.reply)
        return replace(result, trace_headers=span.headers)

    def unchecked(self, request: GateRequest, reason: UnverifiedReason) -> GateResult:
        """Decide on ``request`` at once by policy, judging nothing (``OUTBOX_FULL``: the
        caller is not kept waiting for what could not be monitored anyway)."""
        span = self._tracing.start(request)
        policy = self._gate.policy_for(request.answer.tenant)
        self.counters.shed += 1
        built = self._build(request, span.trace_id, span.headers, not_checked(reason), None, 0)
        result = self._reply(request, policy, built)
        span.end(result.reply)
        return result

    async def _decide(
        self, request: GateRequest, span: DecisionSpan, policy: FailurePolicy
    ) -> GateResult:
        if not self.ready():
            self.counters.errors += 1
            built = self._build(request, span.trace_id, span.headers, _error(), None, 0)
            return self._reply(request, policy, built)
        wait_s = request.arrived + request.budget_ms / 1000 - self._reserve_s - time.monotonic()
        if wait_s <= 0:
            return await self._settled(request, span, policy)
        waiting = self._admit(request, span, wait_s)
        if waiting is None:
            self.counters.shed += 1
            shed = not_checked(UnverifiedReason.OVERLOADED)
            built = self._build(request, span.trace_id, span.headers, shed, None, 0)
            return self._reply(request, policy, built)
        try:
            outcome = await asyncio.wait_for(asyncio.shield(waiting.future), timeout=wait_s)
        except TimeoutError:
            self._abandon(waiting)
            return await self._settled(request, span, policy)
        except asyncio.CancelledError:
            self._abandon(waiting)  # the caller went away: not worth judging
            raise
        if isinstance(outcome, _BuiltReply):
            self.counters.judged += 1
            return self._reply(request, policy, outcome)
        self.counters.errors += 1
        log.warning("gate_judge_error", answer_id=request.answer.answer_id, error=_text(outcome))
        built = self._build(request, span.trace_id, span.headers, _error(), None, 0)
        return self._reply(request, policy, built)

    def _admit(self, request: GateRequest, span: DecisionSpan, wait_s: float) -> _Waiting | None:
        """Queue ``request`` if it can be judged within ``wait_s``; None: shed it."""
        pending = self.pending
        if pending >= self._capacity:
            return None
        units = work_units(len(request.body))
        admission = self._admission
        if pending:
            finish = admission.expected_finish_s(
                queued=len(self._queue),
                in_flight=len(self._in_flight),
                in_flight_elapsed_s=time.monotonic() - self._in_flight_since,
                queued_units=sum(w.units for w in self._queue),
                in_flight_units=sum(w.units for w in self._in_flight),
                units=units,
            )
            if finish > wait_s:
                return None
        elif units > 1 and admission.learnt and admission.batch_s(units) > wait_s:
            return None  # even alone, this body's judging would not fit its budget
        future: asyncio.Future[_BuiltReply | Rejection | BaseException]
        future = asyncio.get_running_loop().create_future()
        waiting = _Waiting(request, span.trace_id, span.headers, future, units)
        self._queue.append(waiting)
        assert self._wake is not None
        self._wake.set()
        self._report_pending()
        return waiting

    def _abandon(self, waiting: _Waiting) -> None:
        waiting.abandoned = True
        try:
            self._queue.remove(waiting)
        except ValueError:
            return  # being judged: its result will be discarded
        self._report_pending()

    async def _settled(
        self, request: GateRequest, span: DecisionSpan, policy: FailurePolicy
    ) -> GateResult:
        """The cheap checks within what is left of the budget; if even they cannot
        finish, nothing checked (``BUDGET_EXCEEDED``)."""
        self.counters.settled += 1
        reason = UnverifiedReason.BUDGET_EXCEEDED
        left_s = request.arrived + request.budget_ms / 1000 - time.monotonic()
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(
            self._settle_pool, self._settle_one, request, span.trace_id, span.headers, reason
        )
        try:
            built = await asyncio.wait_for(work, timeout=max(left_s, _MIN_SETTLE_WAIT_S))
        except Exception as exc:  # noqa: BLE001 - a timeout or a settle bug: nothing checked
            if not isinstance(exc, TimeoutError):
                log.warning("gate_settle_failed", error=_text(exc))
            built = self._build(request, span.trace_id, span.headers, not_checked(reason), None, 0)
        return self._reply(request, policy, built)

    def _settle_one(
        self,
        request: GateRequest,
        trace_id: str | None,
        headers: OutHeaders,
        reason: UnverifiedReason,
    ) -> _BuiltReply:
        """In the settle thread: the cheap checks and the records."""
        started = time.perf_counter()
        if self._settles:
            settling: SettlesCheaply = self._judge  # type: ignore[assignment]
            [judgement] = settling.settle_batch([request.answer], reason=reason)
        else:
            judgement = not_checked(reason)
        judge_ms = (time.perf_counter() - started) * 1000
        return self._build(request, trace_id, headers, judgement, judge_ms, 1)

    def _fallback(self, request: GateRequest, span: DecisionSpan) -> _BuiltReply:
        return self._build(request, span.trace_id, span.headers, _error(), None, 0)

    # ------------------------------------------------------------------ batching

    async def _run_batches(self) -> None:
        """Drain the queue, one judge call per micro-batch, until cancelled."""
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = self._take()
                if not batch:
                    break
                self._in_flight = batch
                self._in_flight_since = started = time.monotonic()
                self._report_pending()
                judge_ms: float | None = None
                results: Sequence[_BuiltReply | Rejection | BaseException | None]
                try:
                    results, judge_ms = await loop.run_in_executor(
                        self._judge_pool, self._judge_batch, batch
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every request answers by policy
                    results = [exc] * len(batch)
                finally:
                    self._in_flight = []
                if judge_ms is not None:
                    units = sum(w.units for w in batch)
                    self._admission.observe(units, time.monotonic() - started)
                    self._sensor.judged(len(batch), judge_ms)
                    self.counters.batches.append(len(batch))
                for waiting, result in zip(batch, results, strict=True):
                    if not waiting.future.done() and result is not None:
                        waiting.future.set_result(result)
                self._report_pending()

    def _take(self) -> list[_Waiting]:
        """The next batch: up to ``batch_max`` requests and, past the first, ``batch_max``
        work units (a large body is judged alone, not with small ones waiting on it)."""
        batch: list[_Waiting] = []
        units = 0.0
        limit = self._gate.batch_max
        while self._queue and len(batch) < limit:
            waiting = self._queue[0]
            if waiting.abandoned:
                self._queue.popleft()
                continue
            if batch and units + waiting.units > limit:
                break
            self._queue.popleft()
            batch.append(waiting)
            units += waiting.units
        return batch

    def _judge_batch(
        self, batch: Sequence[_Waiting]
    ) -> tuple[list[_BuiltReply | Rejection | None], float]:
        """In the judge thread: one judge call for the batch, then each answer's records
        (none for an answer whose caller was answered meanwhile)."""
        started = time.perf_counter()
        judged = judge_answers(
            [w.request.answer for w in batch], self._judge, self._limits.judge_deadline_s
        )
        judge_ms = (time.perf_counter() - started) * 1000
        judged_at = datetime.now(UTC)
        results: list[_BuiltReply | Rejection | None] = []
        for waiting, judgement in zip(batch, judged, strict=True):
            if isinstance(judgement, Rejection):
                results.append(judgement)
            elif waiting.abandoned:
                results.append(None)
            else:
                results.append(
                    self._build(
                        waiting.request,
                        waiting.trace_id,
                        waiting.headers,
                        judgement,
                        judge_ms,
                        len(batch),
                        judged_at=judged_at,
                    )
                )
        return results, judge_ms

    # ------------------------------------------------------------------ output

    def _build(
        self,
        request: GateRequest,
        trace_id: str | None,
        headers: OutHeaders,
        judgement: AnswerJudgement,
        judge_ms: float | None,
        batch_size: int,
        *,
        judged_at: datetime | None = None,
    ) -> _BuiltReply:
        """The reply's verdict and the monitored records of ``judgement``, through the
        stage's own output path (a record that cannot be built becomes its dead letter;
        the reply still carries the whole verdict)."""
        judged_at = judged_at or datetime.now(UTC)
        answer = request.answer
        if request.notes:  # e.g. a trace-context field dropped
            judgement = judgement.model_copy(update={"limits": [*judgement.limits, *request.notes]})
        verdict = None
        records: list[OutboundRecord] = []
        if self._publish and request.monitored:
            message = IncomingMessage(request.body, request.origin, trace_id, headers)
            output = outputs_for(
                [message],
                [JudgedAnswer(answer, judgement)],
                judge_info=self._info,
                judge_ms=judge_ms or 0.0,
                batch_size=max(1, batch_size),
                limits=self._limits,
                topics=self._topics,
                judged_at=judged_at,
            )
            records = output.records
            verdict = output.verdicts[0] if output.verdicts else None
        if verdict is None:
            verdict = verdict_for(
                answer,
                judgement,
                judge_info=self._info,
                judged_at=judged_at,
                judge_ms=judge_ms or 0.0,
                batch_size=max(1, batch_size),
                trace_id=trace_id,
            )
        return _BuiltReply(judgement, verdict, records, judge_ms)

    def _reply(self, request: GateRequest, policy: FailurePolicy, built: _BuiltReply) -> GateResult:
        judgement = built.judgement
        decision = decide_reply(request.answer.answer, judgement, policy)
        reply = GateReply(
            decision=decision.action,
            verified=judgement.verified,
            reason=judgement.unverified_reason,
            answer_text=decision.answer_text,
            verdict=built.verdict,
            latency_ms=max(0.0, (time.monotonic() - request.arrived) * 1000),
            budget_ms=request.budget_ms,
            policy=policy,
        )
        return GateResult(reply, built.records, built.judge_ms)

    def _report_pending(self) -> None:
        pending = self.pending
        self.counters.max_pending = max(self.counters.max_pending, pending)
        self._sensor.pending(pending)


def _error() -> AnswerJudgement:
    return not_checked(UnverifiedReason.JUDGE_ERROR)


def _bad_budget(header: str | bytes) -> GateError:
    shown = header.decode("latin-1") if isinstance(header, bytes) else header
    return GateError(
        error="bad_budget",
        detail=f"{BUDGET_HEADER} must be a positive number of milliseconds, got {shown[:40]!r}",
    )


def _text(error: object) -> str:
    if isinstance(error, Rejection):
        return f"{error.reason.value}: {error.error}"
    return repr(error)[:500]
