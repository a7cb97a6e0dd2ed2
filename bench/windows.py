"""Window state: what the pane layout stores and what its ticks cost, for many keys.

Replays outcomes through the window table (``streamproc.monitor.windows.table``) into a
dict standing in for the changelogged store, 3 partitions, live traffic (wall clock =
event time + 0.5 s), a tick of every partition every ``--tick-s`` simulated seconds, as
the window loop does. Two traffic shapes per key count:

- sparse: ``--answers`` answers over ``--span-s`` seconds, keys drawn at random (most
  keys see an answer every few minutes);
- steady: every key answers once a minute for ``--steady-minutes`` (long enough for the
  state to reach its steady size: lateness 1 h + the 1 h hopping window + a bit).

Each shape runs with the default windows (1 min tumbling; 5 min every 1 min and 1 h
every 5 min hopping) and, for comparison, with the tumbling window alone.

Reported: live table bytes (JSON key + value, what a compacted changelog and a restoring
worker hold) and the share of panes, the largest pane record, changelog bytes written,
the Python heap the table takes (``sys.getsizeof`` summed over a sample of entries,
scaled up), CPU time of the whole replay, and the CPU time of each partition tick by
kind: quiet (nothing due), a minute closing (1 min and 5 min windows), a five-minute
closing (the 1 h windows too). Times are CPU seconds of this process with the garbage
collector paused while a tick is timed (a collection of the whole state is nobody's
tick); the machine is shared, wall time would measure the neighbours.

    .venv/bin/python -m bench windows [--keys 1000 10000] [--shapes sparse steady]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
import uuid
import zlib
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streamproc.contracts.events import AnswerOutcome
from streamproc.kafka.store import encode_entry
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.loop import SERIES_PER_TICK
from streamproc.monitor.windows.table import (
    PANE_PREFIX,
    SEEN_PREFIX,
    SERIES_PREFIX,
    close_due,
    count_outcome,
    forget_expired_seen,
    window_timing,
)

PARTITIONS = 3
T0 = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC).timestamp()
LAG_S = 0.5  # wall clock = event time + this: live traffic
MAX_EVENT_AGE_S = 7 * 24 * 3600.0  # worker.event_time_max_past_s default


class RecordingStore(MutableMapping[str, Any]):
    """A dict that adds up the changelog bytes its writes would produce (JSON key +
    value; a delete is a tombstone: the key alone)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.changelog_bytes = 0

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.changelog_bytes += len(key) + len(encode_entry(key, value)[1] or b"")
        self.data[key] = value

    def __delitem__(self, key: str) -> None:
        self.changelog_bytes += len(key)
        del self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@dataclass
class TickTimes:
    """CPU seconds of each partition tick and the aggregates it published."""

    quiet: list[float] = field(default_factory=list)
    closing: list[tuple[float, int]] = field(default_factory=list)

    def total_s(self) -> float:
        return sum(self.quiet) + sum(spent for spent, _ in self.closing)


def keys_of(count: int) -> list[tuple[str, str, str]]:
    """``count`` (tenant, assistant, model) keys: 10 tenants, 2 models per assistant."""
    return [(f"tenant-{n % 10}", f"assistant-{n // 2:05d}", f"model-{n % 2}") for n in range(count)]


def sparse(keys: int, answers: int, span_s: float, seed: int) -> Iterator[AnswerOutcome]:
    rng = random.Random(seed)
    names = keys_of(keys)
    for at in sorted(rng.uniform(0, span_s) for _ in range(answers)):
        yield outcome(rng, names[rng.randrange(keys)], at)


def steady(keys: int, minutes: int, seed: int) -> Iterator[AnswerOutcome]:
    rng = random.Random(seed)
    names = keys_of(keys)
    offsets = [rng.uniform(0, 60) for _ in names]
    for minute in range(minutes):
        batch = [(minute * 60 + offsets[n], n) for n in range(keys)]
        for at, n in sorted(batch):
            yield outcome(rng, names[n], at)


def outcome(rng: random.Random, key: tuple[str, str, str], at: float) -> AnswerOutcome:
    tenant, assistant, model = key
    return AnswerOutcome(
        event_id=str(uuid.UUID(int=rng.getrandbits(128))),
        answer_id=str(uuid.UUID(int=rng.getrandbits(128))),
        tenant=tenant,
        assistant_id=assistant,
        model=model,
        occurred_at=datetime.fromtimestamp(T0 + at, tz=UTC),
        hallucinated=rng.random() < 0.2,
        abstained=rng.random() < 0.05,
        contradicted_claims=rng.randrange(2),
        unsupported_claims=rng.randrange(2),
        faithfulness=rng.random(),
        judge_ms=rng.lognormvariate(3, 1),
    )


def partition_of(assistant_id: str) -> int:
    return zlib.crc32(assistant_id.encode()) % PARTITIONS  # outcomes are keyed by assistant


def replay(
    items: Iterator[AnswerOutcome], settings: WindowSettings, tick_s: float
) -> tuple[RecordingStore, TickTimes, float, int]:
    """Count everything, ticking every partition every ``tick_s``; the store, the tick
    times, the CPU seconds of the whole replay and the answers counted."""
    timing = window_timing(settings, max_event_age_s=MAX_EVENT_AGE_S)
    store = RecordingStore()
    indexes = [PartitionIndex(timing) for _ in range(PARTITIONS)]
    ticks = TickTimes()
    limit = max(50, SERIES_PER_TICK // PARTITIONS)  # as the window loop splits it
    counted = 0
    next_tick = T0 + tick_s
    started = time.process_time()

    def tick(now: float) -> None:
        """One tick of each partition, bounded as the loop bounds it; the loop ticks again
        at once while series are left, so here too (each such tick timed on its own)."""
        for index in indexes:
            while True:
                gc.disable()
                try:
                    began = time.process_time()
                    closed = close_due(store, index, now, limit=limit)
                    forget_expired_seen(store, index, now)
                    spent = time.process_time() - began
                finally:
                    gc.enable()
                if closed.aggregates:
                    ticks.closing.append((spent, len(closed.aggregates)))
                else:
                    ticks.quiet.append(spent)
                if not index.more_due(now):
                    break

    for item in items:
        now = item.occurred_at.timestamp() + LAG_S
        while now >= next_tick:
            tick(next_tick)
            next_tick += tick_s
        partition = partition_of(item.assistant_id)
        count_outcome(store, indexes[partition], item, partition=partition, now=now)
        counted += 1
    return store, ticks, time.process_time() - started, counted


def heap_bytes(store: RecordingStore, prefix: str, sample: int = 2000) -> float:
    """Python heap taken by the entries under ``prefix``: a sample, scaled up. Objects
    shared between entries (field names, small ints) are counted once."""
    keys = [key for key in store.data if key.startswith(prefix)]
    if not keys:
        return 0.0
    chosen = random.Random(1).sample(keys, min(sample, len(keys)))
    seen: set[int] = set()
    total = sum(_deep_size(key, seen) + _deep_size(store.data[key], seen) for key in chosen)
    return total * len(keys) / len(chosen)


def _deep_size(value: Any, seen: set[int]) -> int:
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple):
        size += sum(_deep_size(v, seen) for v in value)
    elif hasattr(value, "__slots__"):
        size += sum(_deep_size(getattr(value, name), seen) for name in value.__slots__)
    return size


def run_case(
    name: str, items: Iterator[AnswerOutcome], settings: WindowSettings, tick_s: float
) -> None:
    store, ticks, cpu_s, counted = replay(items, settings, tick_s)
    entries = {
        prefix: [k for k in store.data if k.startswith(prefix)]
        for prefix in (PANE_PREFIX, SERIES_PREFIX, SEEN_PREFIX)
    }
    pane_bytes = [_record_bytes(k, store.data[k]) for k in entries[PANE_PREFIX]]
    live = sum(_record_bytes(k, v) for k, v in store.data.items())
    heap = sum(heap_bytes(store, prefix) for prefix in entries)
    closing = sorted(spent for spent, _ in ticks.closing)
    aggregates = sum(count for _, count in ticks.closing)
    minutes = max(1.0, (len(ticks.quiet) + len(ticks.closing)) / PARTITIONS * tick_s / 60)
    print(f"\n{name}: {counted:,} answers")
    rows: list[tuple[str, str]] = [
        (
            "live entries: panes / series / seen marks",
            " / ".join(f"{len(v):,}" for v in entries.values()),
        ),
        ("live table bytes (compacted changelog)", f"{live / 1e6:.1f} MB"),
        ("  of which panes", f"{sum(pane_bytes) / 1e6:.1f} MB"),
        ("largest pane record", f"{max(pane_bytes, default=0):,} B"),
        ("changelog bytes written", f"{store.changelog_bytes / 1e6:.1f} MB"),
        ("Python heap of the table (sampled)", f"{heap / 1e6:.0f} MB"),
        ("replay, count + ticks (CPU s)", f"{cpu_s:.1f}"),
        ("  per answer (CPU us)", f"{cpu_s / counted * 1e6:.0f}"),
        ("quiet tick of one partition, median (CPU ms)", _ms(ticks.quiet, 0.5)),
        ("closing ticks of one partition", f"{len(closing):,}"),
        ("  median / p99 / max (CPU ms)", " / ".join(_ms(closing, q) for q in (0.5, 0.99, 1.0))),
        ("  aggregates per closing tick, median", _median([c for _, c in ticks.closing])),
        ("  CPU per aggregate published (us)", f"{sum(closing) / max(1, aggregates) * 1e6:.0f}"),
        ("all ticks, CPU per minute of traffic (ms)", f"{ticks.total_s() / minutes * 1e3:.0f}"),
    ]
    for label, value in rows:
        print(f"  {label:48}{value:>28}")


def _record_bytes(key: str, value: Any) -> int:
    return len(key) + len(encode_entry(key, value)[1] or b"")


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3:.3f}"


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench windows", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--shapes", nargs="+", default=["sparse", "steady"])
    parser.add_argument("--answers", type=int, default=100_000, help="sparse: answers")
    parser.add_argument("--span-s", type=float, default=600.0, help="sparse: event-time span")
    parser.add_argument("--steady-minutes", type=int, default=130)
    parser.add_argument("--tick-s", type=float, default=1.0)
    parser.add_argument("--tumbling-only", action="store_true", help="skip the default windows")
    args = parser.parse_args(argv)
    print(
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"nproc {os.cpu_count()}, {_cpu_model()}; {PARTITIONS} partitions, "
        f"a tick every {args.tick_s:g} s"
    )
    variants = [("tumbling only", WindowSettings(hopping=[]))]
    if not args.tumbling_only:
        variants.insert(0, ("default windows", WindowSettings()))
    for keys in args.keys:
        for shape in args.shapes:
            for label, settings in variants:
                if shape == "sparse":
                    items = sparse(keys, args.answers, args.span_s, seed=keys)
                    name = f"sparse, {keys:,} keys, {args.span_s:.0f} s, {label}"
                else:
                    items = steady(keys, args.steady_minutes, seed=keys)
                    name = f"steady, {keys:,} keys x 1/min for {args.steady_minutes} min, {label}"
                run_case(name, items, settings, args.tick_s)
    return 0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
