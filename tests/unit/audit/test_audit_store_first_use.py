"""Several processes opening a fresh audit store at once all get a working store.

Before: ``create_all`` raced between "is the table there?" and "create it", and the
loser failed with "table already exists" (84 of 180 openings in a reproduction)."""

from __future__ import annotations

import threading
from pathlib import Path

from streamproc.audit.store import AuditStore


def test_openers_racing_on_a_fresh_store_all_succeed(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    for round_ in range(15):
        url = f"sqlite:///{tmp_path}/race-{round_}.db"
        barrier = threading.Barrier(3)

        def open_store(url: str = url, barrier: threading.Barrier = barrier) -> None:
            store = AuditStore(url)
            try:
                barrier.wait()
                assert store.partitions() == []
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                failures.append(exc)
            finally:
                store.close()

        threads = [threading.Thread(target=open_store) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
