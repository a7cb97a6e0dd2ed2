"""ONNX Runtime sessions on the CPU, sized by ``InferenceSettings``.

The only module that imports onnxruntime. A graph whose sequence axis is pinned (the
aegis NLI export pins 160) is rewritten in memory to a symbolic axis with the ``onnx``
package (``symbolic_axis``), so each batch is padded only to its longest row; without
``onnx``, or for a graph that cannot be rewritten, the pinned length stays and every
batch is padded to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort  # type: ignore[import-untyped]  # onnxruntime ships no stubs
import structlog
from numpy.typing import NDArray
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors  # type: ignore[import-untyped]

from streamproc.inference.manifest import ModelInputs
from streamproc.inference.options import InferenceSettings
from streamproc.inference.symbolic_axis import input_shapes, make_dim_symbolic

__all__ = ["OnnxModel", "open_session", "session_options"]

_SEQUENCE_SYMBOL = "sequence"
# What ONNX Runtime raises for bytes it cannot load as a model.
_ONNX_ERRORS: tuple[type[Exception], ...] = (
    ort_errors.Fail,
    ort_errors.InvalidArgument,
    ort_errors.InvalidGraph,
    ort_errors.InvalidProtobuf,
)
# What a failed rewrite can raise; anything else is a bug and propagates.
_REWRITE_ERRORS: tuple[type[Exception], ...] = (
    ImportError,  # the onnx package (the model extra) is not installed
    ValueError,
    ort_errors.RuntimeException,
    *_ONNX_ERRORS,
)

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class OnnxModel:
    """A loaded session plus what callers must know to feed it.

    ``fixed_length`` is set when the graph pins the sequence axis and could not be made
    symbolic: every batch must then be padded to exactly that length. ``rewritten`` says
    the pinned axis was made symbolic in memory.
    """

    session: Any  # onnxruntime.InferenceSession (untyped)
    inputs: ModelInputs
    input_names: frozenset[str]
    output_names: tuple[str, ...]
    fixed_length: int | None
    rewritten: bool

    def run(self, feeds: Mapping[str, NDArray[np.int64]], output: str) -> NDArray[np.float32]:
        """One output of one batch, as float32."""
        wanted = {name: array for name, array in feeds.items() if name in self.input_names}
        (result,) = self.session.run([output], wanted)
        return np.asarray(result, dtype=np.float32)


def session_options(settings: InferenceSettings) -> Any:
    """CPU session options: the configured thread counts and every graph optimisation."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.intra_op_threads
    options.inter_op_num_threads = settings.inter_op_threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = (
        ort.ExecutionMode.ORT_PARALLEL
        if settings.inter_op_threads > 1
        else ort.ExecutionMode.ORT_SEQUENTIAL
    )
    return options


def open_session(
    model: bytes,
    settings: InferenceSettings,
    inputs: ModelInputs,
    *,
    make_symbolic: bool = True,
) -> OnnxModel:
    """A session for the ONNX ``model`` bytes (already verified by the caller).

    Checks the graph takes the inputs the manifest names; with ``make_symbolic`` a
    pinned sequence axis is rewritten so batches can be padded to their longest row.
    """
    options = session_options(settings)
    session = None
    try:
        shapes = input_shapes(model)  # no session needed to see a pinned axis
    except ImportError:  # without the onnx package, ONNX Runtime reads them
        session = _readable_session(model, options)
        shapes = _input_shapes(session)
    except ValueError as error:
        raise ValueError(f"not a readable ONNX model: {error}") from error
    pinned = _pinned_length(shapes, inputs)
    if pinned is not None and pinned < inputs.max_length:
        raise ValueError(
            f"the graph pins the sequence axis to {pinned}, below the manifest's "
            f"max_length {inputs.max_length}"
        )
    rewritten = False
    if pinned is not None and make_symbolic:
        symbolic = _symbolic_session(model, pinned, options, inputs)
        if symbolic is not None:
            session, pinned, rewritten = symbolic, None, True
    if session is None:
        session = _readable_session(model, options)
    graph_inputs = {item.name for item in session.get_inputs()}
    if graph_inputs != set(_declared_inputs(inputs)):
        raise ValueError(
            f"the manifest's inputs {_declared_inputs(inputs)} do not match the graph's "
            f"{sorted(graph_inputs)}"
        )
    return OnnxModel(
        session=session,
        inputs=inputs,
        input_names=frozenset(graph_inputs),
        output_names=tuple(item.name for item in session.get_outputs()),
        fixed_length=pinned,
        rewritten=rewritten,
    )


def _session(model: bytes, options: Any) -> Any:
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _readable_session(model: bytes, options: Any) -> Any:
    try:
        return _session(model, options)
    except _ONNX_ERRORS as error:
        raise ValueError(f"not a readable ONNX model: {error}") from error


def _input_shapes(session: Any) -> dict[str, tuple[int | str | None, ...]]:
    """Each graph input's declared shape: an int for a fixed dimension, a str for a
    named one, None for an unnamed one."""
    return {item.name: tuple(item.shape) for item in session.get_inputs()}


def _declared_inputs(inputs: ModelInputs) -> list[str]:
    names = [inputs.input_ids, inputs.attention_mask]
    if inputs.token_type_ids is not None:
        names.append(inputs.token_type_ids)
    return names


def _pinned_length(
    shapes: Mapping[str, tuple[int | str | None, ...]], inputs: ModelInputs
) -> int | None:
    """The sequence length the graph pins (axis 1 of its inputs), or None if free."""
    declared = _declared_inputs(inputs)
    missing = [name for name in declared if name not in shapes]
    if missing:
        raise ValueError(
            f"the graph has no input {missing} named in the manifest (it has {sorted(shapes)})"
        )
    pins: set[int] = set()
    for name in declared:
        shape = shapes[name]
        if len(shape) != 2:
            raise ValueError(f"graph input {name!r} has shape {shape}, expected (batch, sequence)")
        if isinstance(shape[1], int):
            pins.add(shape[1])
    if len(pins) > 1:
        raise ValueError(f"graph inputs pin different sequence lengths: {sorted(pins)}")
    return pins.pop() if pins else None


def _symbolic_session(model: bytes, pinned: int, options: Any, inputs: ModelInputs) -> Any:
    """A session on the graph with its pinned axis made symbolic, or None (and a
    warning) when that does not work; the caller then pads to the pin."""
    try:
        rewritten, changed = make_dim_symbolic(model, pinned, _SEQUENCE_SYMBOL)
        if not changed:
            raise ValueError("the rewrite left the sequence axis pinned")
        session = _session(rewritten, options)
        if _pinned_length(_input_shapes(session), inputs) is not None:
            raise ValueError("the rewrite left the sequence axis pinned")
        _smoke(session, inputs, length=min(8, pinned - 1))
    except _REWRITE_ERRORS as error:
        _log.warning("onnx.fixed_length_padding", pinned=pinned, reason=str(error))
        return None
    return session


def _smoke(session: Any, inputs: ModelInputs, length: int) -> None:
    """Run one short dummy row, so a graph that hard-codes the pinned length inside
    (a reshape constant, say) is caught at load rather than on the first real batch."""
    ones = np.ones((1, max(length, 1)), dtype=np.int64)
    feeds = {inputs.input_ids: ones, inputs.attention_mask: ones}
    if inputs.token_type_ids is not None:
        feeds[inputs.token_type_ids] = np.zeros_like(ones)
    session.run(None, feeds)
