"""``python -m bench NAME [OPTIONS]``: one runner for the benchmarks (BENCHMARKS.md says what
each measured, with the command it ran). ``python -m bench NAME --help`` lists a
benchmark's options; a benchmark's module is imported only when it runs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHMARKS: dict[str, tuple[str, str]] = {
    "judge": (
        "bench.judge",
        "the judge's throughput, latency and memory against a naive NLI baseline",
    ),
    "cost": ("bench.cost", "the judge's CPU seconds per answer as evidence and claims grow"),
    "embedding-cache": ("bench.embedding_cache", "what the evidence-embedding cache saves"),
    "stream": ("bench.stream", "worker processes against a real Kafka broker, end to end"),
    "windows": ("bench.windows", "window state: what the panes store and what ticks cost"),
    "tracing": ("bench.tracing", "what tracing costs per answer, off against on"),
    "gate": ("bench.gate", "the inline gate under open-loop load, over HTTP and Kafka"),
    "gate-overhead": ("bench.gate_overhead", "what the gate's service adds to its judge call"),
    "gate-stream": (
        "bench.gate_stream",
        "the streaming gate: sentences released while answers stream, against /v1/check",
    ),
    "kafka-round-trip": ("bench.kafka_round_trip", "request / reply through Kafka, no gate"),
}
"""Each benchmark's name, module (whose ``main(argv)`` runs it) and what it measures."""


def usage() -> str:
    width = max(map(len, BENCHMARKS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in BENCHMARKS.items()]
    return "\n".join(
        ["usage: python -m bench NAME [OPTIONS]   (python -m bench NAME --help)", "", *lines]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] not in BENCHMARKS:
        print(f"python -m bench: no benchmark {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[args[0]][0])
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
