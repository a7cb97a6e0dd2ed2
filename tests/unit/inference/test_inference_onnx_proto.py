"""The in-memory ONNX shape rewrite: pinned dims become named ones, everything else is
copied byte for byte, and malformed bytes raise ``ValueError``."""

from __future__ import annotations

import pytest

from streamproc.inference._onnx_proto import graph_input_shapes, make_dim_symbolic


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _dim(value: int | str) -> bytes:
    if isinstance(value, int):
        return _varint(1 << 3) + _varint(value)  # dim_value, a varint field
    return _field(2, value.encode())  # dim_param


def _value_info(name: str, dims: list[int | str]) -> bytes:
    shape = b"".join(_field(1, _dim(d)) for d in dims)
    tensor = _varint(1 << 3) + _varint(7) + _field(2, shape)  # elem_type INT64
    return _field(1, name.encode()) + _field(2, _field(1, tensor))


def _model(dims: list[int | str]) -> bytes:
    node = _field(1, _field(4, b"Identity"))  # graph.node, opaque here
    graph = (
        node
        + _field(11, _value_info("input_ids", dims))
        + _field(12, _value_info("out", dims))
        + _field(13, _value_info("hidden", [*dims, 384]))
    )
    return _varint(1 << 3) + _varint(8) + _field(7, graph)  # ir_version 8, graph


def test_pinned_dims_become_symbolic() -> None:
    model = _model(["batch", 160])
    assert graph_input_shapes(model) == {"input_ids": ("batch", 160)}
    rewritten, changed = make_dim_symbolic(model, 160, "sequence")
    assert changed == 1
    assert graph_input_shapes(rewritten) == {"input_ids": ("batch", "sequence")}
    assert rewritten == _model(["batch", "sequence"])  # outputs and hints too, nodes kept


def test_unpinned_model_is_unchanged() -> None:
    model = _model(["batch", "sequence"])
    assert make_dim_symbolic(model, 160, "sequence") == (model, 0)


def test_other_sizes_are_left_alone() -> None:
    model = _model(["batch", 128])
    rewritten, changed = make_dim_symbolic(model, 160, "sequence")
    assert (rewritten, changed) == (model, 0)


@pytest.mark.parametrize("data", [b"\x3a\x05abc", b"\x3a", b"\x00\x01", b"\x3f"])
def test_malformed_bytes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        make_dim_symbolic(data, 160, "sequence")
