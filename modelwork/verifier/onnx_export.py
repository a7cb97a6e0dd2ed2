"""Export a BERT-input module to fp32 ONNX the way the runtime reads it.

Shared by the verifier's and the embedder's training scripts: inputs ``input_ids``,
``attention_mask``, ``token_type_ids`` (batch, sequence), both axes dynamic; the legacy
TorchScript exporter at opset 17, whose plain MatMul nodes ``quantize_dynamic`` turns
into int8 products.
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["INPUT_NAMES", "export_fp32"]

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def export_fp32(
    module: torch.nn.Module, path: Path, output_name: str, output_axes: dict[int, str]
) -> None:
    """``module(input_ids, attention_mask, token_type_ids)`` -> ``output_name`` at ``path``."""
    module.eval()
    sample = torch.ones((2, 16), dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        module,
        (sample, sample, torch.zeros_like(sample)),
        str(path),
        input_names=list(INPUT_NAMES),
        output_names=[output_name],
        dynamic_axes={**dict.fromkeys(INPUT_NAMES, axes), output_name: output_axes},
        opset_version=17,
        do_constant_folding=True,
        dynamo=False,
    )
