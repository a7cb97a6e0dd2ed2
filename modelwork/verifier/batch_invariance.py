"""Whether a verifier's scores depend on the pairs it is batched with, measured.

The loader batches a model's inputs only when its manifest declares ``batch_invariant =
true`` (``streamproc.inference.loader``); otherwise it runs one pair per call, so a claim's
verdict never depends on the claims beside it. An int8 graph whose activations are
quantised per call is not batch-invariant: the scale of a batch's activations depends on
every pair in it. This script measures it, so the manifest declares what was seen:

    .venv/bin/python modelwork/verifier/batch_invariance.py models/NAME \\
        build/verifier/dev_pairs.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort  # type: ignore[import-untyped]
from tokenizers import Encoding, Tokenizer

__all__ = ["PAIRS", "TOLERANCE", "measure"]

PAIRS = 32
TOLERANCE = 1e-6
"""Largest logit difference still read as the same score (float32 noise)."""


def _logits(session: ort.InferenceSession, batch: Sequence[Encoding]) -> np.ndarray:
    width = max(len(e.ids) for e in batch)
    pad = [width - len(e.ids) for e in batch]
    feeds = {
        "input_ids": np.array([e.ids + [0] * p for e, p in zip(batch, pad, strict=True)]),
        "attention_mask": np.array(
            [[1] * len(e.ids) + [0] * p for e, p in zip(batch, pad, strict=True)]
        ),
        "token_type_ids": np.array([e.type_ids + [0] * p for e, p in zip(batch, pad, strict=True)]),
    }
    out: np.ndarray = session.run(["logits"], {k: v.astype(np.int64) for k, v in feeds.items()})[0]
    return out


def measure(model_dir: Path, dev_pairs: Path, max_length: int = 256) -> dict[str, Any]:
    """``PAIRS`` dev pairs scored one per call and all in one padded batch: the largest
    and mean absolute logit difference, how many supported / not-supported decisions
    changed, and the declaration that follows."""
    session = ort.InferenceSession(
        str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    with dev_pairs.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line, _ in zip(handle, range(PAIRS), strict=False)]
    encoded = [tokenizer.encode(r["premise"], r["hypothesis"]) for r in rows]
    alone = np.concatenate([_logits(session, [e]) for e in encoded])
    batched = _logits(session, encoded)
    diff = np.abs(alone - batched)
    changed = int(((alone[:, 1] > alone[:, 0]) != (batched[:, 1] > batched[:, 0])).sum())
    largest = float(diff.max())
    return {
        "pairs": len(encoded),
        "max_abs_logit_diff": round(largest, 6),
        "mean_abs_logit_diff": round(float(diff.mean()), 6),
        "decisions_changed": changed,
        "batch_invariant": largest <= TOLERANCE,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, help="models/<name> (model.onnx, tokenizer.json)")
    parser.add_argument("dev_pairs", type=Path, help="dev_pairs.jsonl of the training run")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.model_dir, args.dev_pairs)))


if __name__ == "__main__":
    main()
