"""Make a pinned sequence axis symbolic, with the ``onnx`` package, in memory.

Some exports pin the sequence axis (the aegis NLI export pins 160) although every
operator is shape-generic; ONNX Runtime then refuses any other length, so every input
would be padded to the pin, however short. Only the shapes declared for graph inputs,
outputs and ``value_info`` hints change; nodes and weights are untouched. ``onnx`` is
optional at run time (the ``model`` extra): without it the caller pads to the pin.
"""

from __future__ import annotations

from typing import Any

__all__ = ["input_shapes", "make_dim_symbolic"]

Shape = tuple[int | str | None, ...]


def input_shapes(model: bytes) -> dict[str, Shape]:
    """Each graph input's declared shape: an int for a fixed dimension, a str for a
    named one, None for an unnamed one. Reads the bytes without building a session.

    Raises ``ImportError`` without the ``onnx`` package and ``ValueError`` for bytes
    that are not a model.
    """
    return {
        info.name: tuple(_size(dim) for dim in info.type.tensor_type.shape.dim)
        for info in _parse(model).graph.input
    }


def make_dim_symbolic(model: bytes, pinned: int, symbol: str) -> tuple[bytes, int]:
    """``model`` with every dimension equal to ``pinned`` in the graph's inputs, outputs
    and shape hints replaced by the named dimension ``symbol``.

    Returns the new bytes and how many graph inputs changed. Raises ``ImportError``
    without the ``onnx`` package and ``ValueError`` for bytes that are not a model.
    """
    proto = _parse(model)
    graph = proto.graph
    changed_inputs = sum(_rename(info, pinned, symbol) for info in graph.input)
    for info in [*graph.output, *graph.value_info]:
        _rename(info, pinned, symbol)
    if not changed_inputs:
        return model, 0
    return proto.SerializeToString(), changed_inputs


def _parse(model: bytes) -> Any:
    import onnx
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    try:
        return onnx.load_model_from_string(model)
    except DecodeError as error:
        raise ValueError(f"not an ONNX model: {error}") from error


def _size(dim: Any) -> int | str | None:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    return str(dim.dim_param) or None


def _rename(value_info: Any, pinned: int, symbol: str) -> bool:
    """Rename the pinned dimensions of one declared tensor; whether any was."""
    renamed = False
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value == pinned:
            dim.dim_param = symbol  # a oneof: clears dim_value
            renamed = True
    return renamed
