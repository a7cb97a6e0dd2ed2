"""The Kafka round-trip floor script, end to end on the integration tests' real broker:
every request answered, the two legs adding up to the round trip, and the judge timed in
each round and condition asked for, and its topics gone afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.integration
def test_every_request_comes_back_and_its_legs_add_up_to_the_round_trip(
    tmp_path: Path,
    kafka_bootstrap: str,  # the session's broker (tests/conftest.py)
) -> None:
    out = tmp_path / "round_trip.json"
    args = ["--bootstrap", kafka_bootstrap, "--requests", "15", "--gap-ms", "5", "--json", str(out)]
    args += ["--judge", "--rounds", "1", "--judge-answers", "4"]
    env = {**os.environ, "STREAMPROC_JUDGE__NAME": "rules"}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "kafka-round-trip", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    trip, there, back = (report[leg] for leg in ("round_trip_ms", "there_ms", "back_ms"))
    assert trip["count"] == there["count"] == back["count"] == 15
    assert 0 < there["p50"] < trip["p50"] and 0 < back["p50"] < trip["p50"]
    assert there["mean"] + back["mean"] == pytest.approx(trip["mean"], abs=1e-6)
    assert report["judge"] == "rules"
    rounds = [(each["round"], each["condition"], each["count"]) for each in report["judge_alone"]]
    assert rounds == [(1, "quiet", 4), (1, "traffic", 4)]
    assert not _still_there(kafka_bootstrap, report["topics"])


def _still_there(bootstrap: str, topics: list[str], wait_s: float = 15.0) -> set[str]:
    """Which of ``topics`` the cluster still lists after up to ``wait_s`` (a deletion
    reaches the metadata a moment after it is accepted)."""

    async def listed() -> set[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return set(await admin.list_topics()) & set(topics)
        finally:
            await admin.close()

    deadline = time.monotonic() + wait_s
    left = asyncio.run(listed())
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = asyncio.run(listed())
    return left
