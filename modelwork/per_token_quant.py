"""Make the int8 models batch-invariant by quantising activations per token.

``onnxruntime.quantization.quantize_dynamic`` (the shipped ``minilm-l6-v2-dq8`` and
``minilm-verifier-int8``) quantises each matrix product's input with one scale for the
whole call: every token of every text in the batch, padding included. A pair's score
then moves with its batch neighbours, so the judge runs one input per call. This script
rewrites those graphs with the ``onnx`` package so that each token row gets its own
scale (symmetric, ``max |x| / 127``), the way LLM int8 inference quantises activations:

* each ``DynamicQuantizeLinear`` becomes a row-wise absolute maximum and one standard
  per-axis ``QuantizeLinear`` over the ``[rows, width]`` view (zero point 128), so a
  row's int8 values depend on that row alone;
* each ``MatMulInteger -> Cast -> Mul(a_scale * b_scale)`` becomes ONNX Runtime's fused
  ``MatMulIntegerToFloat`` with the weights' per-channel scales, then one ``Mul`` by the
  rows' scales (integer products are exact, whatever the batch);
* the verifier's masked mean (``ReduceSum`` over the padded sequence, whose summation
  order follows the padded length) becomes a ``MatMul`` of the mask with the hidden
  states.

The int8 weights stay the source graphs' own. What it gives (``--trial``, numbers in
BENCHMARKS.md): outputs bit-identical alone and inside shuffled, padded batches, closer
to fp32 than per-call quantisation. ``per_token`` is the last step of the default
embedder's build (``modelwork/verifier/export_embedder.py`` -> ``minilm-l6-v2-pt8``, which
the judge embeds with in batches of up to 8 texts / 192 tokens: about 1.5x the texts/s of
one text per call on short texts). For
the verifier it does not pay on this machine class (slower than one pair per call at
every batch size tried), so NLI keeps one pair per call.
tests/unit/inference/test_loader_batch_invariance.py runs the rewrite on the verifier to prove
the invariance and checks every model that declares it. Needs the ``onnx`` package (dev
and model extras); nothing here runs in the worker.

    .venv/bin/python modelwork/per_token_quant.py --trial [--batch-size 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnxruntime as ort  # type: ignore[import-untyped]  # noqa: E402

from streamproc.inference.embeddings import mean_pool  # noqa: E402
from streamproc.inference.manifest import ModelManifest  # noqa: E402
from streamproc.inference.registry import ModelRegistry  # noqa: E402
from streamproc.inference.tokenize import Encoded, TextTokenizer  # noqa: E402

# the dynamic-int8 models the trial rewrites, and the output each is read by
SOURCES = {"minilm-l6-v2-dq8": "last_hidden_state", "minilm-verifier-int8": "logits"}
# fp32 graphs of the same weights, where the registry has one: the fidelity reference
REFERENCES = {"minilm-l6-v2-dq8": "minilm-l6-v2-int8"}
_ZERO_POINT = 128  # uint8 zero point of the symmetric row quantisation
_EPSILON = 1e-12  # scale floor: an all-zero row must not divide by zero


# --------------------------------------------------------------------------- rewriting
def per_token(model: Any) -> Any:
    """The model with per-token activation quantisation and a batch-invariant mean."""
    widths = _input_widths(model.graph)
    _quantise_rows(model.graph, widths, _ranks(model, widths))
    _fuse_scaled_products(model)
    _mean_as_matmul(model.graph)
    import onnx

    onnx.checker.check_model(model)
    return model


def _quantise_rows(graph: Any, widths: dict[str, int], ranks: dict[str, int]) -> None:
    """``DynamicQuantizeLinear`` (one scale per call) -> one scale per token row.

    A row's scale is ``max |x| / 127``; the rows are quantised by one per-axis
    ``QuantizeLinear`` over the ``[rows, width]`` view. The views' shapes and the
    zero-point vector are built once per kind of tensor (rank and width), not once per
    product: at one text per call these small nodes cost about as much as the arithmetic.
    """
    from onnx import helper, numpy_helper

    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(_EPSILON, np.float32), "pt/epsilon"),
            numpy_helper.from_array(np.array(1 / 127, np.float32), "pt/inverse_127"),
            numpy_helper.from_array(np.array(_ZERO_POINT, np.uint8), "pt/zero_point"),
            numpy_helper.from_array(np.array([-1], np.int64), "pt/flat"),
        ]
    )
    nodes = []
    built: set[str] = set()  # views shared by the tensors of one kind (rank, width)
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        x = node.input[0]
        quantised, scale, zero_point = node.output
        name = (node.name or x) + "/pt"
        kind = f"{ranks[x]}d_{widths[x]}"
        rows, shape, row_zp = f"pt/rows_{kind}", f"pt/shape_{kind}", f"pt/zp_{kind}"
        graph.initializer.append(
            numpy_helper.from_array(np.array(_ZERO_POINT, np.uint8), zero_point)
        )
        nodes += [
            helper.make_node("Abs", [x], [name + "/abs"]),
            helper.make_node("ReduceMax", [name + "/abs"], [name + "/max"], axes=[-1], keepdims=1),
            helper.make_node("Max", [name + "/max", "pt/epsilon"], [name + "/max_safe"]),
            helper.make_node("Mul", [name + "/max_safe", "pt/inverse_127"], [scale]),
            helper.make_node("Reshape", [scale, "pt/flat"], [name + "/row_scale"]),
        ]
        if kind not in built:
            built.add(kind)
            graph.initializer.append(
                numpy_helper.from_array(np.array([-1, widths[x]], np.int64), rows)
            )
            nodes += [
                helper.make_node("Shape", [x], [shape]),
                helper.make_node("Shape", [name + "/row_scale"], [f"pt/count_{kind}"]),
                helper.make_node("Expand", ["pt/zero_point", f"pt/count_{kind}"], [row_zp]),
            ]
        nodes += [
            helper.make_node("Reshape", [x, rows], [name + "/x_rows"]),
            helper.make_node(
                "QuantizeLinear",
                [name + "/x_rows", name + "/row_scale", row_zp],
                [name + "/q_rows"],
                axis=0,
            ),
            helper.make_node("Reshape", [name + "/q_rows", shape], [quantised]),
        ]
    _replace_nodes(graph, nodes)


def _ranks(model: Any, tensors: Iterable[str]) -> dict[str, int]:
    """Rank of each tensor, by ONNX shape inference (sizes may be symbolic)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    found = {info.name: len(info.type.tensor_type.shape.dim) for info in inferred}
    missing = [name for name in tensors if not found.get(name)]
    if missing:
        raise ValueError(f"shape inference gave no rank for {missing[:3]}")
    return {name: found[name] for name in tensors}


def _input_widths(graph: Any) -> dict[str, int]:
    """Hidden width of each dynamically quantised tensor: its weight's row count."""
    weights = {init.name: init for init in graph.initializer}
    quantised_from = {
        node.output[0]: node.input[0]
        for node in graph.node
        if node.op_type == "DynamicQuantizeLinear"
    }
    widths: dict[str, int] = {}
    for node in graph.node:
        if node.op_type == "MatMulInteger" and node.input[0] in quantised_from:
            widths[quantised_from[node.input[0]]] = int(weights[node.input[1]].dims[0])
    if len(widths) != len(quantised_from):
        raise ValueError("a DynamicQuantizeLinear output does not feed a weight MatMulInteger")
    return widths


def _fuse_scaled_products(model: Any) -> None:
    """``Mul(Cast(MatMulInteger), Mul(a_scale, b_scale))`` -> fused product, then a_scale.

    ONNX Runtime's own fusion of that pattern assumes a scalar ``a_scale`` and gives wrong
    numbers for a per-row one, so the fused op is written here with ``a_scale = 1``.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    graph.initializer.append(numpy_helper.from_array(np.array(1.0, np.float32), "pt/one"))
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    producer = {output: node for node in graph.node for output in node.output}
    dropped: set[str] = set()
    nodes = []
    for node in graph.node:
        scales = producer.get(node.input[1]) if node.op_type == "Mul" else None
        cast = producer.get(node.input[0]) if scales is not None else None
        product = producer.get(cast.input[0]) if cast is not None else None
        if (
            scales is None
            or cast is None
            or product is None
            or scales.op_type != "Mul"
            or cast.op_type != "Cast"
            or product.op_type != "MatMulInteger"
        ):
            nodes.append(node)
            continue
        a, b, a_zero_point, b_zero_point = product.input
        a_scale, b_scale = scales.input
        dropped |= {cast.name or cast.output[0], product.name or product.output[0]}
        dropped |= {scales.name or scales.output[0]}
        unscaled = node.output[0] + "/pt_unscaled"
        nodes += [
            helper.make_node(
                "MatMulIntegerToFloat",
                [a, b, "pt/one", b_scale, a_zero_point, b_zero_point],
                [unscaled],
                domain="com.microsoft",
                name=node.name + "/pt_product",
            ),
            helper.make_node("Mul", [unscaled, a_scale], [node.output[0]], name=node.name),
        ]
    _replace_nodes(graph, [n for n in nodes if (n.name or n.output[0]) not in dropped])


def _mean_as_matmul(graph: Any) -> None:
    """``ReduceSum(hidden * mask, axis=1)`` -> ``mask^T @ hidden`` (verifier head only)."""
    from onnx import helper, numpy_helper

    producer = {output: node for node in graph.node for output in node.output}
    nodes = []
    for node in graph.node:
        masked = producer.get(node.input[0]) if node.op_type == "ReduceSum" else None
        if masked is None or masked.op_type != "Mul":
            nodes.append(node)
            continue
        hidden, mask = masked.input  # [batch, sequence, hidden], [batch, sequence, 1]
        nodes.remove(masked)
        out = node.output[0]
        if not any(init.name == "pt/axis_1" for init in graph.initializer):
            graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "pt/axis_1"))
        nodes += [
            helper.make_node("Transpose", [mask], [out + "/pt_mask_t"], perm=[0, 2, 1]),
            helper.make_node("MatMul", [out + "/pt_mask_t", hidden], [out + "/pt_sum"]),
            helper.make_node("Squeeze", [out + "/pt_sum", "pt/axis_1"], [out]),
        ]
    _replace_nodes(graph, nodes)


def _replace_nodes(graph: Any, nodes: Sequence[Any]) -> None:
    kept = list(nodes)
    del graph.node[:]
    graph.node.extend(kept)


# ------------------------------------------------------------------------------ build
def rewrite(source: str, out: Path) -> Path:
    """Write the per-token version of registry model ``source`` (sha256-checked) to ``out``."""
    import onnx

    registry = ModelRegistry(ROOT / "models")
    path, _ = registry.read_verified(registry.get(source).onnx)
    onnx.save(per_token(onnx.load(str(path))), str(out))
    return out


def run_rows(session: Any, model: Model, rows: Sequence[Encoded]) -> Any:
    """One call on ``rows`` (padded to the longest); mean-pooled for an embedder."""
    batch = model.tokenizer.pad(list(rows), None)
    (result,) = session.run([model.output], batch.feeds(model.manifest.inputs))
    if result.ndim == 3:  # token states: the embedder's mean pooling
        return mean_pool(result, batch.attention_mask)
    return result


@dataclass(frozen=True)
class Model:
    """What feeding one registry model takes: manifest, tokenizer, output name."""

    manifest: ModelManifest
    tokenizer: TextTokenizer
    output: str

    @classmethod
    def load(cls, registry: ModelRegistry, name: str, output: str) -> Model:
        manifest = registry.get(name)
        _, tokenizer_bytes = registry.read_verified(manifest.tokenizer)
        tokenizer = TextTokenizer.from_json(
            tokenizer_bytes.decode("utf-8"), max_length=manifest.inputs.max_length
        )
        return cls(manifest, tokenizer, output)


# ------------------------------------------------------------------------------ trial
def trial(batch_size: int) -> None:
    """Invariance, distance to the per-call graph and speed, on the benchmark's inputs."""
    from bench.cost_model import checked_claims, evidence_sentences
    from bench.judge import sample_events
    from streamproc.config import Settings

    settings = Settings()
    events, _ = sample_events(None, 20)
    texts: list[str] = []
    pairs: list[tuple[str, str]] = []
    for event in events:
        sentences = evidence_sentences(event)
        claims = checked_claims(event, settings.judge.granularity)
        texts += sentences + claims
        pairs += [(sentence, claim) for claim in claims for sentence in sentences[:3]]
    texts = list(dict.fromkeys(texts))
    print(f"{len(texts):,} texts and {len(pairs):,} pairs from `python -m bench judge`'s sample")
    registry = ModelRegistry(ROOT / "models")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as tmp:
        for source, output in SOURCES.items():
            model = Model.load(registry, source, output)
            source_path, _ = registry.read_verified(model.manifest.onnx)
            rows = (
                model.tokenizer.encode_texts(texts)
                if model.manifest.role == "embedding"
                else model.tokenizer.encode_pairs(pairs)
            )
            rewritten = rewrite(source, Path(tmp) / f"{source}.onnx")
            print(f"{source} ({len(rows):,} inputs, one thread, one call at a time):")
            results = {}
            for label, path, size in (
                ("per call, one input per call", source_path, 1),
                (f"per call, batches of {batch_size}", source_path, batch_size),
                ("per token, one input per call", rewritten, 1),
                (f"per token, batches of {batch_size}", rewritten, batch_size),
            ):
                session = ort.InferenceSession(
                    str(path), options, providers=["CPUExecutionProvider"]
                )
                results[label], rate = _timed(session, model, rows, size)
                print(f"  {label}: {rate:,.0f} per second")
            per_token_alone = results["per token, one input per call"]
            for kind in ("per call", "per token"):
                alone = results[f"{kind}, one input per call"]
                batched = results[f"{kind}, batches of {batch_size}"]
                change = np.abs(alone - batched).max()
                print(f"  {kind}: alone vs shuffled batches, max |change| {change:.3g}")
            per_call_alone = results["per call, one input per call"]
            print(f"  per token vs per call: {_distance(per_call_alone, per_token_alone)}")
            if source in REFERENCES:
                fp32_path, _ = registry.read_verified(registry.get(REFERENCES[source]).onnx)
                session = ort.InferenceSession(
                    str(fp32_path), options, providers=["CPUExecutionProvider"]
                )
                fp32, _ = _timed(session, model, rows, batch_size)
                for kind, found in (("per call", per_call_alone), ("per token", per_token_alone)):
                    print(f"  {kind} vs fp32 ({REFERENCES[source]}): {_distance(fp32, found)}")


def _timed(session: Any, model: Model, rows: Sequence[Encoded], size: int) -> tuple[Any, float]:
    """Outputs in input order from shuffled (timed: length-sorted) batches, and inputs/s."""
    order = sorted(range(len(rows)), key=lambda index: len(rows[index]))
    run_rows(session, model, rows[:1])  # warm-up
    started = time.perf_counter()
    for start in range(0, len(order), size):
        run_rows(session, model, [rows[i] for i in order[start : start + size]])
    rate = len(rows) / (time.perf_counter() - started)
    shuffled = np.random.default_rng(0).permutation(len(rows))
    outputs: list[Any] = [None] * len(rows)
    for start in range(0, len(shuffled), size):
        chunk = shuffled[start : start + size]
        batch_out = run_rows(session, model, [rows[i] for i in chunk])
        for index, row in zip(chunk, batch_out, strict=True):
            outputs[index] = row
    return np.stack(outputs), rate


def _distance(old: Any, new: Any) -> str:
    if old.shape[1] == 2:  # logits: the margin the judge reads
        change = np.abs((new[:, 1] - new[:, 0]) - (old[:, 1] - old[:, 0]))
        agree = float(np.mean((new[:, 1] > new[:, 0]) == (old[:, 1] > old[:, 0])))
        return (
            f"margin |change| mean {change.mean():.3f}, max {change.max():.3f}; "
            f"supported/not agree on {agree:.1%}"
        )
    old_unit = old / np.linalg.norm(old, axis=1, keepdims=True)
    new_unit = new / np.linalg.norm(new, axis=1, keepdims=True)
    cosine = (old_unit * new_unit).sum(axis=1)
    return f"cosine median {np.median(cosine):.4f}, min {cosine.min():.4f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trial", action="store_true", help="invariance, fidelity, speed")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    if not args.trial:
        parser.print_help()
        return 2
    trial(args.batch_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
