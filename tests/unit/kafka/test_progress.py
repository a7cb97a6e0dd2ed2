"""The progress watch: lag without movement is a stall; idle partitions never are."""

from __future__ import annotations

from streamproc.kafka.progress import ProgressWatch


def test_a_partition_with_lag_that_does_not_move_is_stalled_after_the_limit() -> None:
    watch: ProgressWatch[int] = ProgressWatch(stall_after_s=30.0)
    watch.assigned([0, 1], now=0.0)
    watch.committed({0: 10, 1: 5}, now=0.0)
    watch.ends({0: 10, 1: 50}, now=1.0)  # partition 1 has 45 waiting
    assert watch.stalled(now=30.0) == {}
    assert list(watch.stalled(now=31.5)) == [1]
    assert watch.total_lag() == 45


def test_progress_resets_the_clock_and_catching_up_clears_the_stall() -> None:
    watch: ProgressWatch[int] = ProgressWatch(stall_after_s=10.0)
    watch.assigned([0], now=0.0)
    watch.ends({0: 100}, now=0.0)
    watch.acknowledged({0: 40}, now=9.0)
    assert watch.stalled(now=18.0) == {}
    assert list(watch.stalled(now=19.5)) == [0]
    watch.acknowledged({0: 100}, now=20.0)
    assert watch.stalled(now=100.0) == {}


def test_an_idle_partition_is_never_stalled_and_new_work_starts_the_clock() -> None:
    watch: ProgressWatch[int] = ProgressWatch(stall_after_s=5.0)
    watch.assigned([0], now=0.0)
    watch.committed({0: 7}, now=0.0)
    watch.ends({0: 7}, now=1.0)
    assert watch.stalled(now=1000.0) == {}
    watch.ends({0: 9}, now=1000.0)  # work arrives: the worker has 5 s from now
    assert watch.stalled(now=1004.0) == {}
    assert list(watch.stalled(now=1005.0)) == [0]


def test_revocation_forgets_the_partitions() -> None:
    watch: ProgressWatch[str] = ProgressWatch(stall_after_s=1.0)
    watch.assigned(["a"], now=0.0)
    watch.ends({"a": 3}, now=0.0)
    watch.revoked()
    assert watch.stalled(now=100.0) == {}
    assert watch.total_lag() == 0
