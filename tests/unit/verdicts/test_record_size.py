"""The pipeline's record size is the producer's: aiokafka's own estimate, byte for byte."""

from __future__ import annotations

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import given
from hypothesis import strategies as st

from streamproc.verdicts.record import OutboundRecord, estimate_size_in_bytes

_DATA = st.one_of(st.none(), st.binary(max_size=20_000))
_HEADERS = st.lists(st.tuples(st.text(max_size=40), st.binary(max_size=300)), max_size=6)


@given(key=_DATA, value=_DATA, headers=_HEADERS)
def test_the_size_is_aiokafkas_estimate(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
) -> None:
    expected = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
    assert estimate_size_in_bytes(key, value, headers) == expected
    record = OutboundRecord("t", key, value, headers=tuple(headers))
    assert record.size == expected


def test_a_megabyte_value_counts_its_length_prefix() -> None:
    value = b"x" * 1_048_576
    assert estimate_size_in_bytes(
        None, value, []
    ) == DefaultRecordBatchBuilder.estimate_size_in_bytes(None, value, [])
