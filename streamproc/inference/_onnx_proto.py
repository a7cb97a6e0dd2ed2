"""Rewrite a pinned tensor dimension of an ONNX graph to a symbolic one, in memory.

Some exports pin the sequence axis (e.g. 160) although every operator is shape-generic;
ONNX Runtime then refuses any other length, so every batch would be padded to the pin.
This edits the protobuf wire format directly (ONNX field numbers are frozen by the spec)
so no ``onnx`` package is needed: only the shapes of graph inputs, outputs and
``value_info`` hints change; nodes and weights are copied byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

__all__ = ["graph_input_shapes", "make_dim_symbolic"]

# Field numbers from onnx.proto (stable across ONNX versions).
_MODEL_GRAPH = 7
_GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_VALUE_INFO = 11, 12, 13
_VALUE_INFO_NAME, _VALUE_INFO_TYPE = 1, 2
_TYPE_TENSOR = 1
_TENSOR_SHAPE = 2
_SHAPE_DIM = 1
_DIM_VALUE, _DIM_PARAM = 1, 2

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5

_Rewrite = Callable[[bytes], bytes]


def make_dim_symbolic(model: bytes, pinned: int, symbol: str) -> tuple[bytes, int]:
    """``model`` with every dimension equal to ``pinned`` in the graph's inputs, outputs
    and shape hints replaced by the named dimension ``symbol``.

    Returns the new bytes and how many graph inputs were changed. Raises ``ValueError``
    when the bytes are not a well-formed ONNX model.
    """
    changed_inputs = 0

    def dim(data: bytes) -> bytes:
        fields = list(_fields(data))
        values = [
            _read_varint(data, start)[0]
            for num, wt, start, _e, _h in fields
            if num == _DIM_VALUE and wt == _VARINT
        ]
        if values != [pinned]:
            return data
        kept = b"".join(
            data[h:e] for num, _wt, _s, e, h in fields if num not in (_DIM_VALUE, _DIM_PARAM)
        )
        return _encode_bytes_field(_DIM_PARAM, symbol.encode()) + kept

    shape = _rewriter({_SHAPE_DIM: dim})
    tensor = _rewriter({_TENSOR_SHAPE: shape})
    type_ = _rewriter({_TYPE_TENSOR: tensor})
    value_info = _rewriter({_VALUE_INFO_TYPE: type_})

    def graph_input(data: bytes) -> bytes:
        nonlocal changed_inputs
        new = value_info(data)
        changed_inputs += new != data
        return new

    graph = _rewriter(
        {_GRAPH_INPUT: graph_input, _GRAPH_OUTPUT: value_info, _GRAPH_VALUE_INFO: value_info}
    )
    rewritten = _rewriter({_MODEL_GRAPH: graph})(model)
    return rewritten, changed_inputs


def graph_input_shapes(model: bytes) -> dict[str, tuple[int | str | None, ...]]:
    """Each graph input's declared shape: an int for a fixed dimension, a str for a
    named one, None for an unnamed one. Raises ``ValueError`` on malformed bytes."""
    shapes: dict[str, tuple[int | str | None, ...]] = {}
    for graph in _children(model, _MODEL_GRAPH):
        for value_info in _children(graph, _GRAPH_INPUT):
            names = _children(value_info, _VALUE_INFO_NAME)
            name = names[0].decode("utf-8") if names else ""
            dims: list[int | str | None] = []
            for type_ in _children(value_info, _VALUE_INFO_TYPE):
                for tensor in _children(type_, _TYPE_TENSOR):
                    for shape in _children(tensor, _TENSOR_SHAPE):
                        dims.extend(_dim(item) for item in _children(shape, _SHAPE_DIM))
            shapes[name] = tuple(dims)
    return shapes


def _children(data: bytes, number: int) -> list[bytes]:
    """Payloads of the length-delimited fields numbered ``number``."""
    return [
        data[start:end]
        for field, wire_type, start, end, _head in _fields(data)
        if field == number and wire_type == _BYTES
    ]


def _dim(data: bytes) -> int | str | None:
    for number, wire_type, start, end, _head in _fields(data):
        if number == _DIM_VALUE and wire_type == _VARINT:
            return _read_varint(data, start)[0]
        if number == _DIM_PARAM and wire_type == _BYTES:
            return data[start:end].decode("utf-8")
    return None


def _rewriter(children: dict[int, _Rewrite]) -> _Rewrite:
    """A function rewriting the length-delimited fields named in ``children``; every
    other field is copied unchanged."""

    def rewrite(data: bytes) -> bytes:
        out: list[bytes] = []
        for number, wire_type, start, end, head in _fields(data):
            child = children.get(number)
            if child is None or wire_type != _BYTES:
                out.append(data[head:end])
                continue
            out.append(_encode_bytes_field(number, child(data[start:end])))
        return b"".join(out)

    return rewrite


def _fields(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, payload start, field end, field start) per field."""
    pos, size = 0, len(data)
    while pos < size:
        head = pos
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"invalid protobuf field number 0 at byte {head}")
        if wire_type == _VARINT:
            _, end = _read_varint(data, pos)
            start = pos
        elif wire_type == _FIXED64:
            start, end = pos, pos + 8
        elif wire_type == _FIXED32:
            start, end = pos, pos + 4
        elif wire_type == _BYTES:
            length, start = _read_varint(data, pos)
            end = start + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type} at byte {head}")
        if end > size:
            raise ValueError(f"protobuf field at byte {head} runs past the end of its message")
        yield number, wire_type, start, end, head
        pos = end


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError(f"truncated or overlong protobuf varint at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _encode_bytes_field(number: int, payload: bytes) -> bytes:
    return _encode_varint((number << 3) | _BYTES) + _encode_varint(len(payload)) + payload
