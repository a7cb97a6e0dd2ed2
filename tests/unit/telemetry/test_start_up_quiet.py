"""aiokafka's expected start-up errors are lowered while a process starts, and only then."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator

import pytest
import structlog

from streamproc.telemetry.logging import StartUpQuiet, configure_logging, start_up_done

NOT_LEADER = (
    "Failed fetch offsets from %s: %s",
    (1, "[Error 6] NotLeaderForPartitionError: TopicPartition(topic='t', partition=0)"),
)
NO_COORDINATOR = (
    "Group Coordinator Request failed: %s",
    ("[Error 15] CoordinatorNotAvailableError",),
)
NOT_LISTENING = (
    'Unable connect to "%s:%s": %s',
    ("127.0.0.1", 1, "[Errno 111] Connect call failed"),
)
COORDINATOR_DEAD = ("Marking the coordinator dead (node %s)for group %s.", (1, "g"))
REAL = ("OffsetCommit failed for unauthorized topics %s", ({"t"},))


def _record(name: str, message: tuple[str, tuple[object, ...]]) -> logging.LogRecord:
    text, args = message
    return logging.LogRecord(name, logging.ERROR, __file__, 1, text, args, None)


def test_while_starting_transient_states_go_out_at_info() -> None:
    quiet = StartUpQuiet(floor=logging.INFO)
    for name, message in [
        ("aiokafka.consumer.fetcher", NOT_LEADER),
        ("aiokafka.consumer.group_coordinator", NO_COORDINATOR),
        ("aiokafka.consumer.group_coordinator", COORDINATOR_DEAD),
    ]:
        record = _record(name, message)
        assert quiet.filter(record)
        assert (record.levelno, record.levelname) == (logging.INFO, "INFO")


def test_while_starting_connection_failures_drop_to_debug() -> None:
    record = _record("aiokafka", NOT_LISTENING)
    assert not StartUpQuiet(floor=logging.INFO).filter(record)  # under the level: not written
    record = _record("aiokafka", NOT_LISTENING)
    assert StartUpQuiet(floor=logging.DEBUG).filter(record)  # asked for: written at debug
    assert record.levelname == "DEBUG"


def test_other_errors_keep_their_level_while_starting() -> None:
    quiet = StartUpQuiet()
    unrelated = _record("aiokafka.consumer.group_coordinator", REAL)
    ours = _record("streamproc.cli.worker", NOT_LEADER)  # only aiokafka's reports are lowered
    assert quiet.filter(unrelated) and quiet.filter(ours)
    assert unrelated.levelno == ours.levelno == logging.ERROR


def test_once_started_the_same_errors_stay_errors() -> None:
    quiet = StartUpQuiet()
    quiet.end()
    for message in (NOT_LEADER, NO_COORDINATOR, NOT_LISTENING):
        record = _record("aiokafka.consumer.fetcher", message)
        assert quiet.filter(record)
        assert record.levelno == logging.ERROR


@pytest.fixture
def written() -> Iterator[io.StringIO]:
    """Logging as an entry point sets it up; what it writes to stderr, kept here."""
    configure_logging("INFO", json_logs=True)
    stream = io.StringIO()
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    yield stream
    structlog.reset_defaults()
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})


def test_configured_logging_lowers_them_until_start_up_is_done(written: io.StringIO) -> None:
    fetcher = logging.getLogger("aiokafka.consumer.fetcher")
    fetcher.error(NOT_LEADER[0], *NOT_LEADER[1])
    logging.getLogger("aiokafka").error(NOT_LISTENING[0], *NOT_LISTENING[1])
    start_up_done()
    fetcher.error(NOT_LEADER[0], *NOT_LEADER[1])
    lines = [json.loads(line) for line in written.getvalue().splitlines()]
    assert [(line["level"], "NotLeaderForPartition" in line["event"]) for line in lines] == [
        ("info", True),
        ("error", True),
    ]
