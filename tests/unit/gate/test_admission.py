"""The judge's cost learnt from its batches, and the expected finish of a new request."""

from __future__ import annotations

import pytest

from streamproc.gate.admission import UNIT_BYTES, Admission, work_units


def test_overhead_and_per_answer_are_told_apart_by_batch_size() -> None:
    admission = Admission(batch_max=8)
    for _ in range(40):
        for size in (1, 4, 8):
            admission.observe(size, 0.010 + 0.005 * size)
    assert admission.per_answer_s == pytest.approx(0.005, rel=0.05)
    assert admission.overhead_s == pytest.approx(0.010, rel=0.1)


def test_batches_of_one_size_count_all_per_answer() -> None:
    admission = Admission(batch_max=8)
    for _ in range(10):
        admission.observe(2, 0.040)
    assert admission.per_answer_s == pytest.approx(0.020)
    assert admission.overhead_s == pytest.approx(0.0, abs=1e-9)


def test_expected_finish_counts_the_batch_in_flight_and_the_queue() -> None:
    admission = Admission(batch_max=2)
    for _ in range(10):
        admission.observe(1, 0.1)
    idle = admission.expected_finish_s(queued=0, in_flight=0, in_flight_elapsed_s=0.0)
    busy = admission.expected_finish_s(queued=3, in_flight=2, in_flight_elapsed_s=0.05)
    assert idle == pytest.approx(0.1)
    # 0.15 s left of the batch in flight, then 4 answers (2 batches) of 0.1 s each
    assert busy == pytest.approx(0.15 + 0.4)


def test_nothing_learnt_expects_no_wait() -> None:
    admission = Admission(batch_max=4)
    assert not admission.learnt
    assert admission.expected_finish_s(queued=10, in_flight=4, in_flight_elapsed_s=0) == 0


def test_a_large_body_counts_its_size_in_work_units() -> None:
    assert work_units(500) == 1.0 and work_units(UNIT_BYTES) == 1.0
    assert work_units(480_000) == pytest.approx(480_000 / UNIT_BYTES)
    admission = Admission(batch_max=8)
    for _ in range(40):
        for units in (1.0, 3.0, 100.0):
            admission.observe(units, 0.002 + 0.001 * units)
    small_behind_big = admission.expected_finish_s(
        queued=1, in_flight=0, in_flight_elapsed_s=0.0, queued_units=100.0, units=1.0
    )
    small_behind_small = admission.expected_finish_s(
        queued=1, in_flight=0, in_flight_elapsed_s=0.0, queued_units=1.0, units=1.0
    )
    assert small_behind_big == pytest.approx(0.002 + 0.101, rel=0.05)
    assert small_behind_small == pytest.approx(0.002 + 0.002, rel=0.05)
