"""Logging, configured once at the entry point.

structlog renders our own events and, through the stdlib bridge, aiokafka's too, so every
line of a worker is one JSON object (or a readable line for humans).

While a process starts, :class:`StartUpQuiet` lowers aiokafka's reports of states a broker
is expected to pass through (see its docstring); :func:`start_up_done` ends that.
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

import structlog

from streamproc.telemetry.log_context import answer_processors

__all__ = ["START_UP_SETTLE_S", "StartUpQuiet", "configure_logging", "start_up_done"]

_NOISY = ("aiokafka", "kafka")
# Group membership and assignment stay visible at INFO: a worker that owns partitions but
# reads none of them must be explainable from its log.
_MEMBERSHIP = ("aiokafka.consumer.group_coordinator",)

START_UP_SETTLE_S = 30.0
"""How long after its loops joined a process still counts as starting: the first
transaction and the first offset fetches on new topics meet the same transient states."""

# Retriable states of a topic or group that is being created: the client waits them out.
_TRANSIENT = (
    "NotLeaderForPartition",
    "NotLeaderOrFollower",
    "LeaderNotAvailable",
    "CoordinatorNotAvailable",  # GroupCoordinatorNotAvailable too
    "NotCoordinator",
    "CoordinatorLoadInProgress",
    "Marking the coordinator dead",  # a warning that follows the ones above
)
# A broker not listening yet: the start-up retries, and gives up in one line of its own.
_NOT_LISTENING = (
    "Unable connect to",
    "Unable to request metadata from",
    "Unable to update metadata from",
)


class StartUpQuiet(logging.Filter):
    """While starting, aiokafka's errors about expected transient states (a new partition
    without a leader yet, a group coordinator not elected yet) go out at info, and its
    repeated connection failures at debug. Once :meth:`end` is called every record passes
    unchanged: later, those states mean something went wrong."""

    def __init__(self, floor: int = logging.INFO) -> None:
        super().__init__()
        self.floor = floor
        self.starting = True

    def end(self) -> None:
        self.starting = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.starting or record.levelno < logging.WARNING:
            return True
        if not record.name.startswith("aiokafka"):
            return True
        message = record.getMessage()
        if any(name in message for name in _TRANSIENT):
            level = logging.INFO
        elif message.startswith(_NOT_LISTENING):
            level = logging.DEBUG
        else:
            return True
        record.levelno, record.levelname = level, logging.getLevelName(level)
        return level >= self.floor


_START_UP = StartUpQuiet()


def start_up_done() -> None:
    """The process has started: aiokafka's errors are errors again."""
    _START_UP.end()


def configure_logging(
    level: str = "INFO", *, json_logs: bool = True, log_texts: bool = False
) -> None:
    """Route structlog and stdlib logging to stderr with one renderer. Every line about
    an answer carries its trace_id, span_id, answer_id, partition and offset; evidence,
    question and answer texts are cut unless ``log_texts`` (``audit.log_texts``)."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        *answer_processors(log_texts=log_texts),
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    library_level = max(logging.getLevelName(level), logging.WARNING)
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {
                "structlog": {
                    "()": structlog.stdlib.ProcessorFormatter,
                    "processors": [
                        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info,
                        renderer,
                    ],
                    "foreign_pre_chain": shared,
                }
            },
            "handlers": {
                "stderr": {
                    "class": "logging.StreamHandler",
                    "formatter": "structlog",
                    "stream": "ext://sys.stderr",
                }
            },
            "root": {"handlers": ["stderr"], "level": level},
            "loggers": {
                **{name: {"level": library_level} for name in _NOISY},
                **{name: {"level": level} for name in _MEMBERSHIP},
            },
        }
    )
    _START_UP.floor, _START_UP.starting = logging.getLevelName(level), True
    for handler in logging.getLogger().handlers:
        handler.addFilter(_START_UP)
