"""The reusable pieces of ``python -m bench stream``: the stream measured end to end.

Kept apart from the script so the arithmetic is tested (tests/unit/evaluate): when an
open-loop producer sends, how percentiles and rates are taken from what a verdict reader
saw, and how a consumer group's lag is sampled from the broker.

Definitions the report relies on:

* decision latency: from the moment the producer hands an answer to its client to the
  moment its verdict is read by a ``read_committed`` consumer (so: published and its
  transaction committed), both on this process's monotonic clock;
* sustained rate: verdicts decided after the first one was seen, divided by the time
  from the first to the last verdict - the first fetch is the pipeline filling up and
  counts as the start, not as work done in the interval;
* lag: the topic's end offsets minus the group's committed offsets, summed over the
  partitions (a partition without a committed offset counts from its start).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

__all__ = [
    "LagSample",
    "LagSampler",
    "LatencySummary",
    "PhaseResult",
    "as_json",
    "consumer_lag",
    "pacing_schedule",
    "percentile",
    "summarise_latencies",
    "summarise_phase",
    "sustained_rate",
]

Mode = Literal["saturation", "open-loop"]
K = TypeVar("K", bound=Hashable)


# ------------------------------------------------------------------------- pacing


def pacing_schedule(rate_per_s: float, duration_s: float) -> list[float]:
    """Send times (seconds from the start) of an open-loop producer: one answer every
    ``1 / rate_per_s``, from 0 up to (not including) ``duration_s``, whatever the stream
    does. A closed loop would wait for verdicts and so slow down with the stream, hiding
    queueing delay; this one keeps offering the load, so a stream that cannot keep up
    shows as latency and lag."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate must be a positive number, not {rate_per_s}")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number, not {duration_s}")
    # Every send time inside [0, duration); the epsilon keeps 0.07/s for 100 s at 7 sends
    # although 0.07 * 100 is 7.000000000000001 in floating point.
    count = math.ceil(rate_per_s * duration_s - 1e-9)
    return [i / rate_per_s for i in range(count)]


# -------------------------------------------------------------------- percentiles


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), interpolated linearly between the two nearest
    ranks - numpy's default method, so the numbers match ``np.percentile``."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, not {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Decision latencies of one phase, in milliseconds."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float


def summarise_latencies(seconds: Sequence[float]) -> LatencySummary | None:
    """Percentiles of latencies given in seconds; None when there are none."""
    if not seconds:
        return None
    ms = [s * 1000 for s in seconds]
    return LatencySummary(
        count=len(ms),
        p50_ms=percentile(ms, 50),
        p95_ms=percentile(ms, 95),
        p99_ms=percentile(ms, 99),
        max_ms=max(ms),
        mean_ms=statistics.fmean(ms),
    )


def sustained_rate(seen_at: Sequence[float]) -> float | None:
    """Verdicts per second from the first verdict seen to the last (see module doc);
    None when they all arrived at once (no interval to divide by)."""
    if not seen_at:
        return None
    first, last = min(seen_at), max(seen_at)
    after_first = sum(1 for t in seen_at if t > first)
    if after_first == 0 or last <= first:
        return None
    return after_first / (last - first)


# --------------------------------------------------------------------------- lag


def consumer_lag(
    end_offsets: Mapping[K, int],
    committed: Mapping[K, int],
    start_offsets: Mapping[K, int] | None = None,
) -> int:
    """Records of the topic the group has not committed yet, over all partitions. A
    partition with no committed offset (missing, or -1 as the broker says it) counts
    from its start offset (0 when not given: a fresh topic)."""
    lag = 0
    for partition, end in end_offsets.items():
        done = committed.get(partition, -1)
        if done < 0:
            done = (start_offsets or {}).get(partition, 0)
        lag += max(0, end - done)
    return lag


@dataclass(frozen=True, slots=True)
class LagSample:
    """The group's lag ``at_s`` seconds after the phase started."""

    at_s: float
    lag: int


class LagSampler:
    """Samples a consumer group's lag on one topic from the broker, every ``interval_s``,
    as an outside observer (an admin client and a group-less consumer): nothing here
    joins the group or moves its offsets."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        group_id: str,
        *,
        interval_s: float = 1.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self._group_id = group_id
        self._interval_s = interval_s
        self.samples: list[LagSample] = []
        self.errors = 0
        """Samples that failed (a broker hiccup): skipped, counted, never fatal."""
        self._task: asyncio.Task[None] | None = None
        # Made in start(): aiokafka clients belong to the running event loop.
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def sample(self) -> int:
        """The group's lag now."""
        consumer, admin = self._consumer, self._admin
        if consumer is None or admin is None:
            raise RuntimeError("LagSampler.sample() before start()")
        partitions = self._partitions
        ends: dict[TopicPartition, int] = await consumer.end_offsets(partitions)
        offsets = await admin.list_consumer_group_offsets(self._group_id, partitions=partitions)
        committed = {tp: int(meta.offset) for tp, meta in offsets.items()}
        return consumer_lag(ends, committed)

    async def start(self, started_at: float) -> None:
        """Connect and sample in the background; times are taken from ``started_at``
        (a ``time.monotonic()`` value)."""
        self._admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap)
        await self._admin.start()
        await self._consumer.start()
        self._task = asyncio.create_task(self._run(started_at), name="lag-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._consumer is not None:
            await self._consumer.stop()
        if self._admin is not None:
            await self._admin.close()

    async def _run(self, started_at: float) -> None:
        while True:
            tick = time.monotonic()
            try:
                lag = await self.sample()
            except Exception:  # noqa: BLE001 - one failed sample must not end a measurement
                self.errors += 1
            else:
                self.samples.append(LagSample(round(tick - started_at, 3), lag))
            await asyncio.sleep(max(0.0, self._interval_s - (time.monotonic() - tick)))


# ----------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One measured phase of one worker configuration; all rates in answers/s."""

    mode: Mode
    workers: int
    load: float | None
    """Offered load as a fraction of the measured capacity (open loop only)."""
    offered_rate: float | None
    """The open-loop producer's target rate; None for a backlog."""
    sent: int
    decided: int
    """Answers with a verdict seen."""
    missing: int
    """Answers with neither a verdict nor a dead letter when the phase ended."""
    dead_letters: int
    send_rate: float | None
    """Answers sent over the time from the first send to the last."""
    sustained_rate: float | None
    """From the first verdict to the last (see module doc)."""
    achieved_rate: float | None
    """Answers decided over the time from the first send to the last verdict."""
    latency: LatencySummary | None
    send_slip_max_ms: float | None
    """Worst lateness of a send against the schedule (open loop): large values mean the
    producer, not the stream, set the pace."""
    lag: list[LagSample] = field(default_factory=list)
    max_lag: int | None = None
    final_lag: int | None = None
    wall_s: float = 0.0
    judge_time: LatencySummary | None = None
    """The judge's time for the batch each decided answer was in (the verdict's
    ``timings.judge_ms``): how much of the decision latency the judge itself took."""
    mean_batch: float | None = None
    """Mean size of the batch each decided answer was judged in (``timings.batch_size``)."""
    before_judge: LatencySummary | None = None
    """From the send to the start of the batch that judged the answer (reading, waiting
    for the batch in flight): the verdict's ``judged_at`` less its batch's judge time."""
    after_judge: LatencySummary | None = None
    """From the end of judging (``judged_at``) to the verdict read: serialising,
    publishing, the transaction's commit and the reader's fetch."""


def summarise_phase(
    mode: Mode,
    workers: int,
    sent: Mapping[str, float],
    seen: Mapping[str, float],
    *,
    dead: Sequence[str] = (),
    lag: Sequence[LagSample] = (),
    load: float | None = None,
    offered_rate: float | None = None,
    slips_s: Sequence[float] = (),
    wall_s: float = 0.0,
    timings: Mapping[str, tuple[float, int]] | None = None,
    judged_at: Mapping[str, float] | None = None,
) -> PhaseResult:
    """A phase's numbers from the send time of each answer id (``sent``), the time its
    verdict was seen (``seen``), the answer ids that were dead-lettered and the lag
    samples; ``timings``: answer id -> (judge seconds of its batch, batch size), from the
    verdicts; ``judged_at``: answer id -> its verdict's ``judged_at`` on the clock of
    ``sent`` and ``seen``, which splits each latency into before, during and after
    judging. Verdicts of answers this phase did not send (a warm-up) are ignored."""
    decided = {key: at for key, at in seen.items() if key in sent}
    judged = [timings[key] for key in decided if timings and key in timings]
    dead_ids = {key for key in dead if key in sent}
    latencies = [at - sent[key] for key, at in decided.items()]
    ended = {key: judged_at[key] for key in decided if judged_at and key in judged_at}
    before = [
        ended[key] - timings[key][0] - sent[key] for key in ended if timings and key in timings
    ]
    after = [decided[key] - at for key, at in ended.items()]
    send_times = list(sent.values())
    send_span = max(send_times) - min(send_times) if len(send_times) > 1 else 0.0
    achieved: float | None = None
    if decided:
        span = max(decided.values()) - min(send_times)
        achieved = len(decided) / span if span > 0 else None
    return PhaseResult(
        mode=mode,
        workers=workers,
        load=load,
        offered_rate=offered_rate,
        sent=len(sent),
        decided=len(decided),
        missing=len(set(sent) - set(decided) - dead_ids),
        dead_letters=len(dead_ids),
        send_rate=(len(send_times) - 1) / send_span if send_span > 0 else None,
        sustained_rate=sustained_rate(list(decided.values())),
        achieved_rate=achieved,
        latency=summarise_latencies(latencies),
        send_slip_max_ms=max(slips_s) * 1000 if slips_s else None,
        lag=list(lag),
        max_lag=max((s.lag for s in lag), default=None),
        final_lag=lag[-1].lag if lag else None,
        wall_s=wall_s,
        judge_time=summarise_latencies([seconds for seconds, _ in judged]),
        mean_batch=sum(size for _, size in judged) / len(judged) if judged else None,
        before_judge=summarise_latencies(before),
        after_judge=summarise_latencies(after),
    )


def as_json(result: PhaseResult) -> dict[str, Any]:
    """A phase as plain JSON values (the lag samples as ``[at_s, lag]`` pairs)."""
    latency, judge_time = result.latency, result.judge_time
    return {
        "mode": result.mode,
        "workers": result.workers,
        "load": result.load,
        "offered_rate": result.offered_rate,
        "sent": result.sent,
        "decided": result.decided,
        "missing": result.missing,
        "dead_letters": result.dead_letters,
        "send_rate": result.send_rate,
        "sustained_rate": result.sustained_rate,
        "achieved_rate": result.achieved_rate,
        "latency_ms": None
        if latency is None
        else {
            "count": latency.count,
            "p50": latency.p50_ms,
            "p95": latency.p95_ms,
            "p99": latency.p99_ms,
            "max": latency.max_ms,
            "mean": latency.mean_ms,
        },
        "judge_ms": _percentiles(judge_time),
        "before_judge_ms": _percentiles(result.before_judge),
        "after_judge_ms": _percentiles(result.after_judge),
        "mean_batch": result.mean_batch,
        "send_slip_max_ms": result.send_slip_max_ms,
        "max_lag": result.max_lag,
        "final_lag": result.final_lag,
        "lag_samples": [[s.at_s, s.lag] for s in result.lag],
        "wall_s": result.wall_s,
    }


def _percentiles(summary: LatencySummary | None) -> dict[str, float] | None:
    if summary is None:
        return None
    return {"p50": summary.p50_ms, "p95": summary.p95_ms, "p99": summary.p99_ms}
