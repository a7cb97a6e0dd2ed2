"""Window state: bytes and tick cost, the old layout against the new, in one run.

OLD (reimplemented here as it was before commit 0845a38): each window keeps the list of
every event id it counted, every update rewrites that list, and every tick of a
partition validates every window of the table (``list(windows.items())``).
NEW (``streamproc.stream.window_table`` / ``window_index``): counters-only windows,
one seen mark per event, and a per-partition index; a tick reads only what it pops.

Both replay the same answers, in event-time order, into a dict standing in for the
faust table, with a tick per partition every ``--tick-every-s`` simulated seconds. Then
both decide the same two ticks of partition 0 (``--repeats`` times each, median):
a quiet tick (nothing due) and a closing tick (the watermark passes the last windows),
with the garbage collector paused while a tick is timed. Times are CPU seconds of this
process (``time.process_time``): the machine is shared, and wall time mostly measured
the neighbours.
The due keys of old and new are checked to be the same.

    .venv/bin/python scripts/bench_windows.py [--answers 100000] [--assistants 1000 10000]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import random
import statistics
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from streamproc.config import WindowSettings
from streamproc.stream.window_index import PartitionIndex
from streamproc.stream.window_table import (
    count_outcome,
    forget_expired_seen,
    index_timing,
    mark_closed,
    persist_watermark,
    windows_to_close,
)
from streamproc.stream.windows import AnswerOutcome, close_window, window_key, window_start

PARTITIONS = 3
SETTINGS = WindowSettings()  # the defaults: size 60 s, grace 10 s, idle 5 s, retain 3600 s
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC).timestamp()
LAG_S = 0.5  # wall clock = event time + this: live traffic


class RecordingStore(MutableMapping[str, Any]):
    """A dict that adds up the changelog bytes its writes would produce (JSON key + value;
    a delete is a tombstone: the key alone)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.changelog_bytes = 0

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.changelog_bytes += len(json.dumps(key)) + len(json.dumps(value))
        self.data[key] = value

    def __delitem__(self, key: str) -> None:
        self.changelog_bytes += len(json.dumps(key))
        del self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def live_bytes(self) -> int:
        """What a compacted changelog (and a recovering worker) holds."""
        return sum(len(json.dumps(k)) + len(json.dumps(v)) for k, v in self.data.items())


# --- OLD: the layout and loop before this change, kept faithfully ------------------------


class OldWindowState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str
    start: float
    end: float
    partition: int
    answers: int = 0
    answered: int = 0
    hallucinated: int = 0
    contradicted_claims: int = 0
    unsupported_claims: int = 0
    abstentions: int = 0
    faithfulness_sum: float = 0.0
    faithfulness_n: int = 0
    event_ids: list[str] = []
    last_update: float = 0.0
    closed_at: float | None = None
    revision: int = -1
    late_events: int = 0
    dirty: bool = True


def old_add_outcome(
    state: OldWindowState | None, outcome: AnswerOutcome, *, partition: int, now: float
) -> OldWindowState:
    if state is None:
        start = window_start(outcome.occurred_at.timestamp(), SETTINGS.size_s)
        state = OldWindowState(
            assistant_id=outcome.assistant_id,
            start=start,
            end=start + SETTINGS.size_s,
            partition=partition,
        )
    if outcome.event_id in state.event_ids:
        return state
    updated = state.model_copy(deep=True)
    updated.event_ids.append(outcome.event_id)
    updated.answers += 1
    if outcome.abstained:
        updated.abstentions += 1
    else:
        updated.answered += 1
        updated.hallucinated += int(outcome.hallucinated)
    updated.contradicted_claims += outcome.contradicted_claims
    updated.unsupported_claims += outcome.unsupported_claims
    if outcome.faithfulness is not None:
        updated.faithfulness_sum += outcome.faithfulness
        updated.faithfulness_n += 1
    if updated.closed_at is not None:
        updated.late_events += 1
    updated.last_update = now
    updated.dirty = True
    return updated


def old_is_due(state: OldWindowState, *, watermark: float | None, now: float) -> bool:
    if not state.dirty:
        return False
    if state.closed_at is not None:
        return True
    closes_at = state.end + SETTINGS.grace_s
    if watermark is not None and watermark >= closes_at:
        return True
    return now >= closes_at and now - state.last_update >= SETTINGS.idle_close_s


def old_is_expired(state: OldWindowState, *, now: float) -> bool:
    return (
        state.closed_at is not None
        and not state.dirty
        and now - state.closed_at >= SETTINGS.retain_closed_s
    )


def old_decide(
    windows: MutableMapping[str, Any], partition: int, watermark: float | None, now: float
) -> list[tuple[str, OldWindowState]]:
    """The old ``close_due`` up to the aggregate send: every window validated, every tick."""
    due: list[tuple[str, OldWindowState]] = []
    for key, raw in list(windows.items()):
        state = OldWindowState.model_validate(raw)
        if state.partition != partition:
            continue
        if old_is_due(state, watermark=watermark, now=now):
            due.append((key, state))
        elif old_is_expired(state, now=now):
            del windows[key]
    return due


class Old:
    def __init__(self) -> None:
        self.store = RecordingStore()
        self.watermarks: dict[int, float] = {}

    def count(self, outcome: AnswerOutcome, partition: int, now: float) -> None:
        occurred = outcome.occurred_at.timestamp()
        self.watermarks[partition] = max(self.watermarks.get(partition, occurred), occurred)
        key = window_key(outcome.assistant_id, window_start(occurred, SETTINGS.size_s))
        previous = self.store.get(key)
        state = old_add_outcome(
            None if previous is None else OldWindowState.model_validate(previous),
            outcome,
            partition=partition,
            now=now,
        )
        self.store[key] = state.model_dump(mode="json")

    def tick(self, partition: int, now: float) -> None:
        for key, state in old_decide(self.store, partition, self.watermarks.get(partition), now):
            closed = state.model_copy(
                update={"closed_at": now, "revision": state.revision + 1, "dirty": False}
            )
            self.store[key] = closed.model_dump(mode="json")


class New:
    def __init__(self) -> None:
        self.store = RecordingStore()
        self.indexes = {p: PartitionIndex(index_timing(SETTINGS)) for p in range(PARTITIONS)}

    def count(self, outcome: AnswerOutcome, partition: int, now: float) -> None:
        count_outcome(
            self.store,
            self.indexes[partition],
            outcome,
            partition=partition,
            size_s=SETTINGS.size_s,
            now=now,
        )

    def tick(self, partition: int, now: float) -> None:
        index = self.indexes[partition]
        for key, state in windows_to_close(self.store, index, now):
            closed, _ = close_window(state, now=now)
            mark_closed(self.store, index, key, closed)
        forget_expired_seen(self.store, index, now)
        persist_watermark(self.store, index, partition)


# --- the run ------------------------------------------------------------------------------


def outcomes(answers: int, assistants: int, span_s: float, seed: int) -> list[AnswerOutcome]:
    rng = random.Random(seed)
    times = sorted(rng.uniform(0, span_s) for _ in range(answers))
    return [
        AnswerOutcome(
            event_id=str(uuid.UUID(int=rng.getrandbits(128))),
            assistant_id=f"assistant-{rng.randrange(assistants):05d}",
            tenant="tenant",
            model="model",
            occurred_at=datetime.fromtimestamp(T0 + at, tz=UTC),
            hallucinated=rng.random() < 0.2,
            abstained=rng.random() < 0.05,
            contradicted_claims=rng.randrange(2),
            unsupported_claims=rng.randrange(2),
            faithfulness=rng.random(),
        )
        for at in times
    ]


def partition_of(assistant_id: str) -> int:
    return zlib.crc32(assistant_id.encode()) % PARTITIONS


def replay(engine: Old | New, items: list[AnswerOutcome], tick_every_s: float) -> float:
    """Count every outcome, ticking each partition every ``tick_every_s``; seconds taken."""
    started = time.process_time()
    next_tick = T0 + tick_every_s
    for item in items:
        now = item.occurred_at.timestamp() + LAG_S
        while now >= next_tick:
            for partition in range(PARTITIONS):
                engine.tick(partition, next_tick)
            next_tick += tick_every_s
        engine.count(item, partition_of(item.assistant_id), now)
    for partition in range(PARTITIONS):  # settle: what is due at the last event is closed
        engine.tick(partition, items[-1].occurred_at.timestamp() + LAG_S)
    return time.process_time() - started


def median_seconds(
    run: Callable[[], list[str]], prepare: Callable[[], None], repeats: int
) -> tuple[float, list[str]]:
    times: list[float] = []
    due: list[str] = []
    for _ in range(repeats):
        prepare()
        gc.collect()  # a collection of the whole replayed state is nobody's tick cost
        gc.disable()
        try:
            started = time.process_time()
            due = run()
            times.append(time.process_time() - started)
        finally:
            gc.enable()
    return statistics.median(times), due


def measure_ticks(old: Old, new: New, end: float, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds to decide a quiet and a closing tick of partition 0, old and new."""
    results: dict[str, dict[str, float]] = {}
    last_end = window_start(end, SETTINGS.size_s) + SETTINGS.size_s
    scenarios = {
        "quiet": (old.watermarks.get(0), end + 1.0),
        "closing": (last_end + SETTINGS.grace_s, end + 2.0),
    }
    for name, (watermark, now) in scenarios.items():
        results[name] = time_tick(old, new, watermark, now, repeats)
    return results


def time_tick(
    old: Old, new: New, watermark: float | None, now: float, repeats: int
) -> dict[str, float]:
    """Median seconds for old and new to decide one tick of partition 0, on fresh copies."""
    state: dict[str, Any] = {}

    def prepare_old() -> None:
        state["store"] = dict(old.store.data)

    def run_old() -> list[str]:
        return sorted(k for k, _ in old_decide(state["store"], 0, watermark, now))

    def prepare_new() -> None:
        state["store"] = dict(new.store.data)
        index = copy.deepcopy(new.indexes[0])
        if watermark is not None:
            index.observe_event_time(watermark)
        state["index"] = index

    def run_new() -> list[str]:
        return sorted(k for k, _ in windows_to_close(state["store"], state["index"], now))

    old_s, old_due = median_seconds(run_old, prepare_old, repeats)
    new_s, new_due = median_seconds(run_new, prepare_new, repeats)
    if old_due != new_due:
        raise SystemExit(f"old and new disagree on what is due ({len(old_due)} vs {len(new_due)})")
    return {"old_s": old_s, "new_s": new_s, "due": float(len(new_due))}


def run_case(
    answers: int, assistants: int, span_s: float, tick_every_s: float, repeats: int
) -> None:
    items = outcomes(answers, assistants, span_s, seed=assistants)
    old, new = Old(), New()
    old_ingest = replay(old, items, tick_every_s)
    new_ingest = replay(new, items, tick_every_s)
    windows = sum(1 for key in new.store if key.startswith("w|"))
    old_windows = [v for k, v in old.store.data.items() if k.startswith("w|")]
    new_windows = [v for k, v in new.store.data.items() if k.startswith("w|")]
    largest_old = max(len(json.dumps(v)) for v in old_windows)
    largest_new = max(len(json.dumps(v)) for v in new_windows)
    end = items[-1].occurred_at.timestamp() + LAG_S
    ticks = measure_ticks(old, new, end, repeats)

    print(
        f"\n{answers:,} answers, {assistants:,} assistants, {span_s:.0f} s of event time, "
        f"{windows:,} windows, {PARTITIONS} partitions"
    )
    print(f"{'':34}{'old':>14}{'new':>14}{'old/new':>10}")

    def row(label: str, old_value: float, new_value: float, unit: str = "") -> None:
        ratio = old_value / new_value if new_value else math.inf
        print(f"{label:34}{old_value:>13,.4g}{unit}{new_value:>13,.4g}{unit}{ratio:>10.2f}")

    row("live table bytes", old.store.live_bytes(), new.store.live_bytes())
    row(
        "  of which window records",
        sum(len(json.dumps(v)) for v in old_windows),
        sum(len(json.dumps(v)) for v in new_windows),
    )
    row("largest window record bytes", largest_old, largest_new)
    row("changelog bytes written", old.store.changelog_bytes, new.store.changelog_bytes)
    row("replay (count + ticks) CPU s", old_ingest, new_ingest)
    for name, result in ticks.items():
        row(f"{name} tick, one partition CPU ms", result["old_s"] * 1e3, result["new_s"] * 1e3)
        print(f"{'':34}({result['due']:.0f} windows due)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--assistants", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--span-s", type=float, default=600.0)
    parser.add_argument("--tick-every-s", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"nproc {os.cpu_count()}, {_cpu_model()}; medians of {args.repeats} runs per tick, CPU time"
    )
    for assistants in args.assistants:
        run_case(args.answers, assistants, args.span_s, args.tick_every_s, args.repeats)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
