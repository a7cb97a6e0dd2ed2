"""Labelled benchmark rows replayed as live traffic, a share of the review queue answered
with their gold labels: does the live-corrected rate find the true rate?

    .venv/bin/python scripts/replay_reviews.py --data FILE... --label-share S --seed N
        [--task-type T] [--keep-hallucinated F] [--bootstrap HOST:PORT] [--rate R]
        [--sample-rate P] [--min-labels K] [--judge nli|rules] [--json]

The real code path: a broker (``scripts/kafka.sh`` in a private state dir, as
``python -m bench stream`` starts one, unless ``--bootstrap``), one ``python -m
streamproc worker`` with default settings apart from unique topic names, the judge
(``--judge``, default ``$STREAMPROC_JUDGE__NAME`` or nli) and the review sample rate
(``--sample-rate``, default 0.2: a small file needs more passed answers reviewed than
production's 2 %). The worker runs judging, windows, and the labels and accuracy loops.

1. Every row (``--task-type`` only, optionally resampled: ``--keep-hallucinated F`` keeps
   every faithful row and a seeded share F of the hallucinated ones) becomes an
   AnswerEvent (``evaluate/loaders.py``) without its labels, with fresh ids, one tenant
   and assistant (``replay``), ``occurred_at`` = now, and is produced to the answers
   topic (at ``--rate`` answers/s, or all at once). FaithBench-like traffic (there is no
   FaithBench file here; FaithBench is summaries with hard, low-prevalence hallucinations
   on which detectors disagree) is built from the RAGTruth Summary rows:
   ``--task-type Summary --keep-hallucinated 0.3333``.
2. The verdicts (and outcomes, for the task type the worker gave each answer) are read
   back; the review queue is read to its end.
3. A seeded share S of the review items is labelled: one LabelEvent per item, reviewer
   and source ``replay``, answer label = the row's gold ``response_label`` (people stand
   in by gold labels).
4. Once the judge-accuracy events count every label, the numbers: ``true_rate`` (gold
   hallucinated share of the answered rows), ``raw_rate`` (share the judge flagged),
   ``corrected_offline`` (the answers' flags per task type corrected with the shipped
   offline counts) and ``corrected_live`` (the same with the live counts of the accuracy
   events), computed by the window loop's own functions (``WindowTotals.corrected``, the
   live table's ``LiveCorrection``), as if the whole replay were one window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

# Imported after the path is set, for the reason above.
from bench import command_line  # noqa: E402
from bench.stream import kafka_broker, log, run_topics  # noqa: E402
from streamproc.cli.child_process import WorkerProcess  # noqa: E402
from streamproc.config import Settings  # noqa: E402
from streamproc.contracts.events import AnswerEvent, AnswerOutcome, CorrectedRate, Verdict  # noqa: E402
from streamproc.contracts.label_events import JudgeAccuracyEvent, LabelEvent, ReviewItem  # noqa: E402
from streamproc.evaluate.loaders import benchmark_row_to_event, json_rows  # noqa: E402
from streamproc.monitor.windows.live_accuracy import LiveAccuracy, LiveCorrection  # noqa: E402
from streamproc.monitor.windows.panes import LiveCounts, LiveLookup, WindowTotals  # noqa: E402
from streamproc.rates.corrected_rate import ConfusionCounts  # noqa: E402
from streamproc.rates.judge_accuracy import JudgeAccuracy  # noqa: E402
from streamproc.telemetry.logging import configure_logging  # noqa: E402
from streamproc.wiring import judge_key_of, measured_accuracy  # noqa: E402

TENANT = "replay"
ASSISTANT = "replay"
REVIEWER = "replay"
SETTLE_TIMEOUT_S = 1800.0
"""Longest wait for every answer's verdict (the NLI judge on two shared cores is slow)."""
STALL_S = 300.0
"""Give up once no verdict has come for this long."""
LABELS_TIMEOUT_S = 180.0


# ---------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One benchmark row as replayed: its event (no labels) and its gold label."""

    event: AnswerEvent
    hallucinated: bool
    task_type: str
    """The row's own task type (the worker decides its own for the outcome)."""


def load_rows(paths: Sequence[Path], task_type: str | None) -> list[dict[str, Any]]:
    """The benchmark rows of ``paths`` (of ``task_type`` only, when given) that carry a
    gold ``response_label``."""
    rows = []
    for path in paths:
        for _, row in json_rows(path):
            if task_type is not None and row.get("task_type") != task_type:
                continue
            if row.get("response_label") in ("hallucinated", "faithful"):
                rows.append(row)
    return rows


def resample(
    rows: Sequence[dict[str, Any]], keep_hallucinated: float, seed: int
) -> list[dict[str, Any]]:
    """Every faithful row and a seeded share of the hallucinated ones, in file order: a
    lower hallucination prevalence from the same rows (the FaithBench-like traffic)."""
    hallucinated = sorted(r["id"] for r in rows if r["response_label"] == "hallucinated")
    kept = set(
        random.Random(seed).sample(hallucinated, round(keep_hallucinated * len(hallucinated)))
    )
    return [r for r in rows if r["response_label"] == "faithful" or r["id"] in kept]


def replay_rows(rows: Sequence[dict[str, Any]], run: str) -> list[Row]:
    """The rows as new live answers: fresh ids, one tenant and assistant, labels dropped
    (the worker must not see them), ``occurred_at`` set when produced."""
    replayed = []
    for index, row in enumerate(rows):
        event = benchmark_row_to_event(row, index).model_copy(
            update={
                "event_id": f"{run}-e{index}",
                "answer_id": f"{run}-a{index}",
                "conversation_id": f"{run}-c{index}",
                "tenant": TENANT,
                "assistant_id": ASSISTANT,
                "labels": None,
            }
        )
        replayed.append(
            Row(event, row["response_label"] == "hallucinated", str(row.get("task_type")))
        )
    return replayed


# -------------------------------------------------------------------------- labels


def choose_items(items: Iterable[ReviewItem], share: float, seed: int) -> list[ReviewItem]:
    """A seeded share of the review items (the same items for the same seed, whatever
    order they were read in)."""
    ordered = sorted(items, key=lambda item: item.answer_id)
    count = round(share * len(ordered))
    chosen = random.Random(seed).sample(ordered, count)
    return sorted(chosen, key=lambda item: item.answer_id)


def gold_label(item: ReviewItem, gold: Mapping[str, bool], labelled_at: datetime) -> LabelEvent:
    """The label a person would give, stood in for by the row's gold response label."""
    return LabelEvent(
        label_id=f"replay-{item.answer_id}",
        answer_id=item.answer_id,
        tenant=item.tenant,
        reviewer=REVIEWER,
        labelled_at=labelled_at,
        answer_label="hallucinated" if gold[item.answer_id] else "faithful",
        source="replay",
    )


def labels_counted(events: Mapping[str, JudgeAccuracyEvent], tenant: str) -> int:
    """Labels the latest accuracy events of ``tenant``'s cells count."""
    return sum(e.labels for e in events.values() if e.cell.tenant == tenant)


# ------------------------------------------------------------------------- numbers


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _corrected(rate: CorrectedRate | None) -> dict[str, Any] | None:
    return None if rate is None else rate.model_dump(mode="json")


def summarise(
    rows: Sequence[Row],
    outcomes: Mapping[str, AnswerOutcome],
    verdicts: Mapping[str, Verdict],
    *,
    offline: JudgeAccuracy | None,
    live: LiveCorrection,
) -> dict[str, Any]:
    """The replay's numbers (see the module docstring). The corrected rates are the
    window loop's: one :class:`WindowTotals` of every answered answer, per task type."""
    answered = [
        r
        for r in rows
        if r.event.answer_id in verdicts and not verdicts[r.event.answer_id].judgement.abstained
    ]
    flagged = sum(verdicts[r.event.answer_id].judgement.hallucinated for r in answered)
    totals = WindowTotals()
    by_task: dict[str, dict[str, Any]] = {}
    for row in answered:
        outcome = outcomes.get(row.event.answer_id)
        task = outcome.task_type if outcome is not None else None
        hallucinated = verdicts[row.event.answer_id].judgement.hallucinated
        totals.answered += 1
        totals.hallucinated += hallucinated
        if task is None:
            continue
        counts = totals.by_task.setdefault(task, [0, 0])
        counts[0] += 1
        counts[1] += hallucinated
        part = by_task.setdefault(task, {"answers": 0, "flagged": 0, "gold_hallucinated": 0})
        part["answers"] += 1
        part["flagged"] += hallucinated
        part["gold_hallucinated"] += row.hallucinated
    offline_rate = totals.corrected(offline)
    lookup = _lookup(live)
    live_rate = totals.corrected(offline, lookup)
    for task, part in sorted(by_task.items()):
        alone = WindowTotals(
            answered=part["answers"],
            hallucinated=part["flagged"],
            by_task={task: [part["answers"], part["flagged"]]},
        )
        found = lookup(task)
        offline_counts = offline.for_task(task) if offline is not None else None
        part.update(
            true_rate=_rate(part["gold_hallucinated"], part["answers"]),
            raw_rate=_rate(part["flagged"], part["answers"]),
            offline_counts=None if offline_counts is None else _counts(offline_counts),
            live_counts=None if found is None else _counts(found.counts),
            labelled_answers=0 if found is None else found.labelled_answers,
            corrected_offline=_corrected(alone.corrected(offline)),
            corrected_live=_corrected(alone.corrected(offline, lookup)),
        )
    gold = sum(r.hallucinated for r in answered)
    interval = (
        [live_rate.low, live_rate.high]
        if live_rate is not None and live_rate.low is not None
        else None
    )
    return {
        "answers": len(rows),
        "answered": len(answered),
        "abstained": sum(
            1
            for r in rows
            if r.event.answer_id in verdicts and verdicts[r.event.answer_id].judgement.abstained
        ),
        "true_rate": _rate(gold, len(answered)),
        "raw_rate": _rate(flagged, len(answered)),
        "corrected_offline": None if offline_rate is None else offline_rate.estimate,
        "corrected_offline_interval": None
        if offline_rate is None or offline_rate.low is None
        else [offline_rate.low, offline_rate.high],
        "corrected_live": None if live_rate is None else live_rate.estimate,
        "corrected_live_interval": interval,
        "corrected_live_source": None if live_rate is None else live_rate.source,
        "corrected_live_identifiable": None if live_rate is None else live_rate.identifiable,
        "corrected_offline_identifiable": None
        if offline_rate is None
        else offline_rate.identifiable,
        "labels_used": 0 if live_rate is None else live_rate.labels_used,
        "offline_corrected_rate": _corrected(offline_rate),
        "live_corrected_rate": _corrected(live_rate),
        "by_task_type": by_task,
        "row_task_types": _tally(r.task_type for r in rows),
    }


def _lookup(live: LiveCorrection) -> LiveLookup:
    def lookup(task: str) -> LiveCounts | None:
        return live.live_counts(TENANT, ASSISTANT, task)

    return lookup


def _counts(counts: ConfusionCounts) -> dict[str, float]:
    return {k: round(float(getattr(counts, k)), 3) for k in ("tp", "fn", "tn", "fp")}


def _tally(values: Iterable[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return dict(sorted(found.items()))


# -------------------------------------------------------------------------- stream


def replay_settings(
    bootstrap: str, app_id: str, judge: str, *, sample_rate: float, seed: int, min_labels: int
) -> Settings:
    """Product defaults, every topic unique to this run, the review sample rate and the
    labels a cell needs before it is live."""
    groups = run_topics(app_id)
    return Settings(
        app_id=app_id,
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        log_level="INFO",
        **{name: group for name, group in groups.items() if name not in ("review", "labels")},
        judge={"name": judge},
        review={**groups["review"], "sample_rate": sample_rate, "seed": seed},
        labels={**groups["labels"], "min_labels": min_labels},
    )


@dataclass
class Reader:
    """A read_committed reader of the verdicts, outcomes, review queue, dead letters and
    judge-accuracy events of the run."""

    settings: Settings
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    outcomes: dict[str, AnswerOutcome] = field(default_factory=dict)
    items: dict[str, ReviewItem] = field(default_factory=dict)
    accuracy: dict[str, JudgeAccuracyEvent] = field(default_factory=dict)
    dead_letters: int = 0
    last_verdict_at: float = field(default_factory=time.monotonic)
    _consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            *self._topics(),
            bootstrap_servers=self.settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            metadata_max_age_ms=2000,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    def _topics(self) -> tuple[str, ...]:
        s = self.settings
        return (
            s.topics.verdicts,
            s.topics.outcomes,
            s.topics.dead_letter,
            s.review.queue_topic,
            s.labels.accuracy_topic,
        )

    async def poll(self) -> None:
        assert self._consumer is not None
        s = self.settings
        for tp, records in (await self._consumer.getmany(timeout_ms=500)).items():
            for record in records:
                value = record.value or b""
                if tp.topic == s.topics.verdicts:
                    verdict = Verdict.model_validate_json(value)
                    self.verdicts[verdict.answer_id] = verdict
                    self.last_verdict_at = time.monotonic()
                elif tp.topic == s.topics.outcomes:
                    outcome = AnswerOutcome.model_validate_json(value)
                    if outcome.answer_id is not None:
                        self.outcomes[outcome.answer_id] = outcome
                elif tp.topic == s.review.queue_topic:
                    item = ReviewItem.model_validate_json(value)
                    self.items[item.answer_id] = item
                elif tp.topic == s.labels.accuracy_topic and record.value is not None:
                    event = JudgeAccuracyEvent.model_validate_json(value)
                    self.accuracy[event.cell.key] = event
                elif tp.topic == s.topics.dead_letter:
                    self.dead_letters += 1

    async def at_end(self, topic: str) -> bool:
        """Whether every partition of ``topic`` has been read to its (stable) end."""
        assert self._consumer is not None
        parts = [tp for tp in self._consumer.assignment() if tp.topic == topic]
        if not parts:
            return False
        ends: dict[TopicPartition, int] = await self._consumer.end_offsets(parts)
        for tp, end in ends.items():
            if await self._consumer.position(tp) < end:
                return False
        return True


async def produce(settings: Settings, rows: Sequence[Row], rate: float | None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        started = time.monotonic()
        for index, row in enumerate(rows):
            if rate:
                await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
            event = row.event.model_copy(update={"occurred_at": datetime.now(UTC)})
            await producer.send(
                settings.topics.answers,
                key=event.conversation_id.encode(),
                value=event.model_dump_json(exclude_none=True).encode(),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_labels(settings: Settings, labels: Sequence[LabelEvent]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for label in labels:
            await producer.send(
                settings.review.labels_topic,
                key=label.answer_id.encode(),
                value=label.model_dump_json().encode(),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def replay(args: argparse.Namespace, bootstrap: str, rows: Sequence[Row]) -> dict[str, Any]:
    app_id = f"replay-{uuid.uuid4().hex[:8]}"
    settings = replay_settings(
        bootstrap,
        app_id,
        args.judge,
        sample_rate=args.sample_rate,
        seed=args.seed,
        min_labels=args.min_labels,
    )
    ids = {row.event.answer_id for row in rows}
    gold = {row.event.answer_id: row.hallucinated for row in rows}
    log_path = args.log_dir / f"{app_id}.worker.log"
    worker = WorkerProcess(settings, log_path).start()
    reader = Reader(settings)
    started = time.monotonic()
    try:
        await _wait_for_topics(settings)
        await reader.start()
        log(f"worker {worker.pid} started (log {log_path}); producing {len(rows)} answers")
        await produce(settings, rows, args.rate)
        while len(ids & reader.verdicts.keys()) + reader.dead_letters < len(ids):
            _check(worker, reader, started, len(ids))
            await reader.poll()
        judged_s = time.monotonic() - started
        log(f"{len(reader.verdicts)} verdicts in {judged_s:.0f} s; reading the review queue")
        while not await reader.at_end(settings.review.queue_topic):
            await reader.poll()
        await reader.poll()
        items = [item for answer_id, item in reader.items.items() if answer_id in ids]
        chosen = choose_items(items, args.label_share, args.seed)
        now = datetime.now(UTC)
        labels = [gold_label(item, gold, now) for item in chosen]
        await publish_labels(settings, labels)
        log(f"{len(labels)} labels published for {len(items)} review items; waiting")
        deadline = time.monotonic() + LABELS_TIMEOUT_S
        while labels_counted(reader.accuracy, TENANT) < len(labels):
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the accuracy events count {labels_counted(reader.accuracy, TENANT)} "
                    f"of {len(labels)} labels after {LABELS_TIMEOUT_S:g} s (log {log_path})"
                )
            if not worker.running:
                raise SystemExit(f"the worker ended (log {log_path})")
            await reader.poll()
    finally:
        await reader.stop()
        worker.stop()
    table = LiveAccuracy(settings.bootstrap_servers, settings.labels.accuracy_topic)
    for key, event in reader.accuracy.items():
        table.apply(key.encode(), event.model_dump_json().encode())
    judge_key = judge_key_of(settings.judge)
    live = table.for_judge(judge_key, min_labels=settings.labels.min_labels)
    result = summarise(
        rows, reader.outcomes, reader.verdicts, offline=measured_accuracy(settings.judge), live=live
    )
    result.update(
        review_items=len(items),
        review_items_flagged=sum(i.sampled_because == "flagged" for i in items),
        labels_published=len(labels),
        dead_letters=reader.dead_letters,
        judge_seconds=round(judged_s, 1),
        accuracy_cells={key: _cell_json(event) for key, event in sorted(reader.accuracy.items())},
        settings={
            "app_id": app_id,
            "judge": settings.judge.name,
            "judge_key": judge_key,
            "sample_rate": settings.review.sample_rate,
            "review_seed": settings.review.seed,
            "min_labels": settings.labels.min_labels,
            "label_share": args.label_share,
            "seed": args.seed,
            "rate": args.rate,
            "partitions": settings.topics.partitions,
        },
    )
    return result


def _cell_json(event: JudgeAccuracyEvent) -> dict[str, Any]:
    return {
        "labelled_answers": event.labelled_answers,
        "labels": event.labels,
        "sensitivity": event.sensitivity.model_dump(mode="json"),
        "specificity": event.specificity.model_dump(mode="json"),
        "precision": event.precision.model_dump(mode="json"),
        "offline_sensitivity": event.offline_sensitivity,
        "offline_precision": event.offline_precision,
        "drift": event.drift,
    }


async def _wait_for_topics(settings: Settings) -> None:
    """The worker creates the topics; produce only once the answers topic exists."""
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=None)
    await probe.start()
    try:
        deadline = time.monotonic() + 300
        while settings.labels.accuracy_topic not in await probe.topics():
            if time.monotonic() > deadline:
                raise SystemExit("the worker never created its topics")
            await asyncio.sleep(1.0)
    finally:
        await probe.stop()


def _check(worker: WorkerProcess, reader: Reader, started: float, expected: int) -> None:
    now = time.monotonic()
    if not worker.running:
        raise SystemExit(f"the worker ended (log {worker.log_path})")
    if now - started > SETTLE_TIMEOUT_S or now - reader.last_verdict_at > STALL_S:
        raise SystemExit(
            f"{len(reader.verdicts)} of {expected} verdicts after {now - started:.0f} s "
            f"(log {worker.log_path})"
        )


# ---------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True, metavar="FILE")
    parser.add_argument("--label-share", type=float, required=True, metavar="S")
    parser.add_argument("--seed", type=int, required=True, metavar="N")
    parser.add_argument("--task-type", choices=["QA", "Summary", "Data2txt"])
    parser.add_argument(
        "--keep-hallucinated",
        type=float,
        metavar="F",
        help="keep every faithful row and a seeded share F of the hallucinated ones",
    )
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="use this broker")
    parser.add_argument("--rate", type=float, metavar="R", help="answers/s (default: at once)")
    parser.add_argument("--sample-rate", type=float, default=0.2, metavar="P")
    parser.add_argument("--min-labels", type=int, default=Settings().labels.min_labels)
    parser.add_argument(
        "--judge",
        choices=["nli", "rules"],
        default=os.environ.get("STREAMPROC_JUDGE__NAME", "nli"),
    )
    parser.add_argument("--log-dir", type=Path, help="worker logs (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if not 0 < args.label_share <= 1 or not 0 <= args.sample_rate <= 1:
        parser.error("--label-share is in (0, 1], --sample-rate in [0, 1]")
    if args.keep_hallucinated is not None and not 0 <= args.keep_hallucinated <= 1:
        parser.error("--keep-hallucinated is in [0, 1]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING", json_logs=False)  # stdout is the report's
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # new topics elect leaders
    args.log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="replay-reviews-logs-"))
    args.log_dir.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.data, args.task_type)
    if args.keep_hallucinated is not None:
        rows = resample(rows, args.keep_hallucinated, args.seed)
    if not rows:
        raise SystemExit("no labelled rows to replay")
    replayed = replay_rows(rows, f"r{uuid.uuid4().hex[:6]}")
    with kafka_broker(args.bootstrap) as (bootstrap, broker):
        result = asyncio.run(replay(args, bootstrap, replayed))
    result = {
        "command": command_line(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": [str(path) for path in args.data],
        "task_type": args.task_type,
        "keep_hallucinated": args.keep_hallucinated,
        "broker": broker,
        **result,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"true {result['true_rate']}, raw {result['raw_rate']}, corrected offline "
            f"{result['corrected_offline']}, live {result['corrected_live']} "
            f"{result['corrected_live_interval']} ({result['labels_used']} labels)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
