"""The verifier: Hugging Face ``transformers``' BERT encoder with a 2-logit pair head.

The encoder is ``transformers.BertModel`` loaded from the base model's own folder
(``config.json`` + ``model.safetensors`` of all-MiniLM-L6-v2), with eager attention so
the exported graph keeps plain MatMul + Softmax, which ``quantize_dynamic`` turns into
int8 products. The head is new: mean pooling over the attention mask (the base model was
trained to mean-pool) -> dropout -> linear(2). Logit 0 = "not supported", logit 1 =
"supported". It replaces a hand-written BERT in plain torch (``bert.py`` until
2026-12-01), whose forward pass it matches (``modelwork/verifier/check_port.py``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn
from transformers import BertModel  # type: ignore[import-untyped]

__all__ = ["PairClassifier", "load_base", "load_encoder"]


class PairClassifier(nn.Module):
    """BERT encoder + mean pooling + linear head with 2 logits (not supported, supported)."""

    def __init__(self, encoder: BertModel) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        self.head_dropout = nn.Dropout(encoder.config.hidden_dropout_prob)
        self.classifier = nn.Linear(hidden, 2)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    @property
    def word_embeddings(self) -> nn.Embedding:
        embedding: nn.Embedding = self.encoder.embeddings.word_embeddings
        return embedding

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        states = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.to(states.dtype).unsqueeze(-1)
        pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        logits: Tensor = self.classifier(self.head_dropout(pooled))
        return logits


def load_base(model_dir: Path, layers: int = 0) -> PairClassifier:
    """A classifier whose encoder holds the base model's weights; the head is fresh.

    ``layers`` > 0 keeps that many of the base's layers, evenly spaced from the first to
    the last (a smaller student: the cost of a pair is about linear in the layers).
    """
    return PairClassifier(load_encoder(model_dir, layers))


def load_encoder(model_dir: Path, layers: int = 0) -> BertModel:
    """The base model's BERT encoder (fp32, eager attention, no pooler); ``layers`` > 0
    keeps that many of its layers, evenly spaced from the first to the last."""
    encoder = BertModel.from_pretrained(
        str(model_dir), add_pooling_layer=False, attn_implementation="eager"
    )
    total = encoder.config.num_hidden_layers
    if 0 < layers < total:
        keep = sorted({round(i * (total - 1) / max(1, layers - 1)) for i in range(layers)})
        encoder.encoder.layer = nn.ModuleList(encoder.encoder.layer[i] for i in keep)
        encoder.config.num_hidden_layers = len(keep)
    return encoder.to(torch.float32)
