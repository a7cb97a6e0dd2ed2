"""Logging, configured once at the entry point.

structlog renders our own events and, through the stdlib bridge, aiokafka's too, so every
line of a worker is one JSON object (or a readable line for humans).
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

import structlog

from streamproc.adapters.log_context import answer_processors

__all__ = ["configure_logging"]

_NOISY = ("aiokafka", "kafka")
# Group membership and assignment stay visible at INFO: a worker that owns partitions but
# reads none of them must be explainable from its log.
_MEMBERSHIP = ("aiokafka.consumer.group_coordinator",)


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
