"""kcat (librdkafka) as an outside producer and reader: a Kafka client that is not ours.

Our own helpers publish with aiokafka, so they only ever send what aiokafka sends. Real
assistants use librdkafka, Java or Go clients, which compress batches (gzip, snappy,
lz4, zstd), send headers, null keys and tombstones. kcat lets a test send exactly that.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest

__all__ = ["CODECS", "KEY_DELIMITER", "StoredRecord", "kcat_or_skip", "produce", "read_back"]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# A raw tab never occurs in JSON text (it is escaped), so it splits key from value safely.
KEY_DELIMITER = b"\t"
_TIMEOUT_S = 30.0
# librdkafka's "msg" debug line for each message set it sends names the codec it really
# used: it falls back to "uncompressed" when compressing would not make the set smaller.
_PRODUCED_SET = re.compile(rb"Produce MessageSet with (\d+) message\(s\) \(.*, (\w+)\)\s*$")


def kcat_or_skip() -> str:
    """Path of kcat. Missing: skip on a laptop, but fail under ``CI=true``, where
    scripts/test.sh installs it, so a CI run can never pass without these tests."""
    path = shutil.which("kcat")
    if path is not None:
        return path
    reason = "kcat is not installed (apt-get install kcat; scripts/test.sh does it as root)"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; CI is set, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


def produce(
    kcat: str,
    bootstrap: str,
    topic: str,
    lines: Sequence[bytes],
    *,
    codec: str,
    keyed: bool = False,
    headers: Mapping[str, str] | None = None,
    partition: int = 0,
) -> list[str]:
    """Send one record per line, all to ``partition`` in one message set; returns the
    codec of each message set sent (``uncompressed`` where librdkafka chose not to).

    ``keyed``: each line is ``key<TAB>value``; with kcat's ``-Z`` an empty key or value
    is sent as NULL, which is how a tombstone is made. Without it the keys are NULL.
    """
    for line in lines:
        if b"\n" in line:
            raise ValueError(f"a line may not contain a newline: {line!r}")
    command = [kcat, "-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-z", codec]
    # -Z: empty means NULL; the linger keeps the whole run (read at once) in one set.
    command += ["-Z", "-X", "acks=all", "-X", "linger.ms=200", "-d", "msg"]
    if keyed:
        command += ["-K", KEY_DELIMITER.decode()]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}={value}"]
    done = subprocess.run(
        command,
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or b"Delivery failed" in done.stderr:
        raise AssertionError(
            f"kcat -P exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    sets = [_PRODUCED_SET.search(line) for line in done.stderr.splitlines()]
    return [found.group(2).decode() for found in sets if found is not None]


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """Where a record landed and whether its key and value are NULL (kcat's view)."""

    partition: int
    offset: int
    key: bytes | None
    value_length: int | None


def read_back(kcat: str, bootstrap: str, topic: str) -> list[StoredRecord]:
    """Every record of ``topic`` as kcat reads it (from the beginning, then exit)."""
    # partition, offset, key length, value length (-1: NULL), key
    layout = "%p\t%o\t%K\t%S\t%k\n"
    done = subprocess.run(
        [
            kcat,
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-Z",
            "-f",
            layout,
        ],
        capture_output=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"kcat -C exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    records = []
    for line in done.stdout.splitlines():
        partition, offset, key_length, value_length, key = line.split(b"\t", 4)
        records.append(
            StoredRecord(
                partition=int(partition),
                offset=int(offset),
                key=None if int(key_length) < 0 else key,
                value_length=None if int(value_length) < 0 else int(value_length),
            )
        )
    return records
