"""Running the inline gate (``streamproc gate``): the judge in this process, the HTTP
server, and - with publishing on - the record sink and the Kafka request loop, until
SIGTERM or SIGINT stops them in order.

Start order: telemetry and metrics (``/metrics`` on ``metrics.port``, as the worker's);
the service (models loaded and warmed before anything listens, so a missing model fails
at once); the topics, the record sink and the HTTP path's outbox; the HTTP server; the
Kafka request loop. Stop order is the reverse of what takes requests: the HTTP server and
the request loop stop taking them, then the service answers what it still holds, then
the outbox drains (at most ``gate.outbox_drain_s``), then the sink and telemetry flush.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from typing import Any, NoReturn

import structlog

from streamproc.config import Settings
from streamproc.gate.options import GateSettings
from streamproc.gate.outbox import Outbox, OutboxLimits
from streamproc.kafka.security import (
    EXIT_BROKER_UNREACHABLE,
    BrokerUnreachable,
    aiokafka_options,
)
from streamproc.telemetry.logging import START_UP_SETTLE_S, start_up_done
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_gate, gate_request_loop, prepare_topics

__all__ = ["EXIT_REQUEST_LOOP_CRASHED", "main", "outbox_limits", "run_gate"]

log = structlog.get_logger(__name__)

EXIT_REQUEST_LOOP_CRASHED = 4
"""The Kafka request loop ended with an error (the HTTP path had been serving)."""


def main(settings: Settings) -> NoReturn:
    """Block serving the gate until SIGTERM/SIGINT; exit with :func:`run_gate`'s code."""
    code = asyncio.run(run_gate(settings))
    logging.shutdown()
    sys.exit(code)


async def run_gate(settings: Settings) -> int:
    """Serve until SIGTERM/SIGINT (0), or until the Kafka request loop crashes (4); with
    publishing on, a broker that does not answer within ``broker_connect_timeout_s`` of
    the start ends it at once (8)."""
    from streamproc.gate.http.server import GateServer
    from streamproc.gate.metrics import GateMetrics
    from streamproc.web.metrics_server import MetricsServer

    gate = settings.gate
    telemetry = Telemetry.from_settings(settings.telemetry)
    sensor = GateMetrics(settings.gate)
    metrics_server = MetricsServer.from_settings(settings.metrics, sensor)
    service = build_gate(settings, telemetry=telemetry, sensor=sensor)
    options = aiokafka_options(settings.security)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    sink = None
    outbox = None
    server = None
    requests = None
    requests_task: asyncio.Task[None] | None = None
    code = 0
    try:
        if metrics_server is not None:
            await metrics_server.start()
        judge_info = await service.start()
        if gate.publish:
            from streamproc.gate.kafka.sink import KafkaRecordSink

            try:
                await prepare_topics(settings)
            except BrokerUnreachable as exc:
                log.error("broker_unreachable", **exc.fields, exit_code=EXIT_BROKER_UNREACHABLE)
                return EXIT_BROKER_UNREACHABLE
            sink = KafkaRecordSink(
                settings.bootstrap_servers,
                tansu=settings.broker_flavour == "tansu",
                client_options=options,
            )
            await sink.start()
            outbox = Outbox(sink, outbox_limits(gate))
            outbox.start()
            sensor.watch_outbox(outbox)
        server = GateServer(settings.gate, service, sensor=sensor, outbox=outbox)
        await server.start()
        if gate.publish and gate.kafka_requests:
            requests = gate_request_loop(settings, service, client_options=options, sensor=sensor)
            requests_task = asyncio.create_task(requests.run(), name="gate-requests-loop")
        _freeze_start_up_objects()
        loop.call_later(START_UP_SETTLE_S, start_up_done)
        log.info(
            "gate_started",
            host=gate.host,
            port=gate.port,
            judge=judge_info.name,
            publish=gate.publish,
            kafka_requests=requests is not None,
            telemetry=settings.telemetry.exporter,
            metrics=None if metrics_server is None else metrics_server.url,
        )
        code = await _until_stopped(stopping, requests_task)
    finally:
        if server is not None:
            await server.stop()
        if requests is not None:
            requests.stop()
        if requests_task is not None:
            await asyncio.gather(requests_task, return_exceptions=True)
        await service.close()
        if outbox is not None:
            await outbox.close()
        if sink is not None:
            await sink.stop()
        if metrics_server is not None:
            await metrics_server.stop()
        await asyncio.to_thread(telemetry.shutdown)  # flush what is still batched
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    log.info(
        "gate_stopped",
        judged=service.counters.judged,
        shed=service.counters.shed,
        published=None if outbox is None else outbox.published,
        lost=None if outbox is None else outbox.lost,
    )
    return code


def outbox_limits(gate: GateSettings) -> OutboxLimits:
    """The HTTP path's outbox bounds, from the gate's settings."""
    return OutboxLimits(
        max_records=gate.outbox_max_records,
        max_bytes=gate.outbox_max_bytes,
        stall_s=gate.outbox_stall_s,
        drain_s=gate.outbox_drain_s,
    )


def _freeze_start_up_objects() -> None:
    """Move what start-up made (models, tokenizers, settings, clients) out of the cyclic
    collector's reach: a full collection then scans only what requests make, not all of
    that, a pause every decision in flight would wait out."""
    gc.collect()
    gc.freeze()


async def _until_stopped(stopping: asyncio.Event, requests: asyncio.Task[None] | None) -> int:
    """0 once a signal asks to stop; 4 if the request loop ends with an error first (a loop
    that ends without one - it was stopped - waits for the signal too)."""
    waiting = asyncio.create_task(stopping.wait(), name="gate-stop-signal")
    watched: set[asyncio.Future[Any]] = {waiting}
    if requests is not None:
        watched.add(requests)
    try:
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        if requests is not None and requests in done:
            error = requests.exception()
            if error is not None:
                log.error(
                    "gate_requests_loop_crashed",
                    error=repr(error),
                    exit_code=EXIT_REQUEST_LOOP_CRASHED,
                )
                return EXIT_REQUEST_LOOP_CRASHED
            await waiting
        return 0
    finally:
        waiting.cancel()
