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
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

# Imported after the path is set, for the reason above. The replayed rows, the numbers
# and the Kafka side live in scripts/_replay_reviews_{rows,numbers,kafka}.py; this script
# runs one replay and keeps the command line.
from bench import command_line  # noqa: E402
from bench.stream import kafka_broker, log  # noqa: E402
from scripts._replay_reviews_kafka import (  # noqa: E402
    Reader,
    produce,
    publish_labels,
    replay_settings,
    wait_for_topics,
)
from scripts._replay_reviews_numbers import summarise  # noqa: E402
from scripts._replay_reviews_rows import (  # noqa: E402
    TENANT,
    Row,
    choose_items,
    gold_label,
    labels_counted,
    load_rows,
    replay_rows,
    resample,
)
from streamproc.cli.child_process import WorkerProcess  # noqa: E402
from streamproc.config import Settings  # noqa: E402
from streamproc.contracts.label_events import JudgeAccuracyEvent  # noqa: E402
from streamproc.monitor.windows.live_accuracy import LiveAccuracy  # noqa: E402
from streamproc.telemetry.logging import configure_logging  # noqa: E402
from streamproc.wiring import judge_key_of, measured_accuracy  # noqa: E402

SETTLE_TIMEOUT_S = 1800.0
"""Longest wait for every answer's verdict (the NLI judge on two shared cores is slow)."""
STALL_S = 300.0
"""Give up once no verdict has come for this long."""
LABELS_TIMEOUT_S = 180.0


# -------------------------------------------------------------------------- replay


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
        await wait_for_topics(settings)
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
