"""A BERT encoder with a 2-logit pair-classification head, in plain torch.

Why not ``transformers``: the training environment only needs torch, and an encoder this
small (all-MiniLM-L6-v2: 6 layers, hidden 384) is easier to export to a clean ONNX graph
when every op is visible. The weights load from the base model's ``model.safetensors``
under Hugging Face's BERT key names; the head is new. Head = mean pooling over the
attention mask (the base model was trained to mean-pool) -> dropout -> linear(2).
Logit 0 = "not supported", logit 1 = "supported".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

__all__ = ["BertConfig", "PairClassifier", "load_base"]


@dataclass(frozen=True, slots=True)
class BertConfig:
    """The fields of a Hugging Face BERT ``config.json`` this encoder uses."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float

    @classmethod
    def from_json(cls, path: Path) -> BertConfig:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{path}: only hidden_act 'gelu' is implemented")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are implemented")
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


class _Embeddings(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        out: Tensor = self.dropout(self.LayerNorm(x))
        return out


class _Layer(nn.Module):
    """One post-LayerNorm transformer block; attention written out (MatMul + Softmax)
    so that the exported graph quantises cleanly with dynamic int8."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        h = c.hidden_size
        self.heads = c.num_attention_heads
        self.head_dim = h // c.num_attention_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=c.layer_norm_eps)
        self.intermediate = nn.Linear(h, c.intermediate_size)
        self.output = nn.Linear(c.intermediate_size, h)
        self.out_norm = nn.LayerNorm(h, eps=c.layer_norm_eps)
        self.attn_dropout = nn.Dropout(c.attention_probs_dropout_prob)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        b, t, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + bias
        probs = self.attn_dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, h)
        x = self.attn_norm(x + self.dropout(self.attn_out(context)))
        inner = nn.functional.gelu(self.intermediate(x))
        out: Tensor = self.out_norm(x + self.dropout(self.output(inner)))
        return out


class PairClassifier(nn.Module):
    """BERT encoder + mean pooling + linear head with 2 logits (not supported, supported)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.embeddings = _Embeddings(c)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))
        self.head_dropout = nn.Dropout(c.hidden_dropout_prob)
        self.classifier = nn.Linear(c.hidden_size, 2)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        mask = attention_mask.to(torch.float32)
        # Additive bias: 0 where attended, a large negative where padded.
        bias = ((1.0 - mask) * -1e4)[:, None, None, :]
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, bias)
        pooled = (x * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        logits: Tensor = self.classifier(self.head_dropout(pooled))
        return logits


# Hugging Face BERT key -> this module's key, per layer.
_LAYER_KEYS = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "intermediate",
    "output.dense": "output",
    "output.LayerNorm": "out_norm",
}


def _rename(key: str) -> str | None:
    """This module's name for a base-model key; None for keys it does not use."""
    key = key.removeprefix("bert.")
    if key.startswith("embeddings.") and key != "embeddings.position_ids":
        return key
    if key.startswith("encoder.layer."):
        _, _, number, rest = key.split(".", 3)
        for hf, ours in _LAYER_KEYS.items():
            if rest.startswith(hf + "."):
                return f"layers.{number}.{ours}.{rest[len(hf) + 1 :]}"
    return None  # position_ids buffer, pooler (unused: the head mean-pools)


def load_base(model_dir: Path) -> PairClassifier:
    """A classifier whose encoder holds the base model's weights; the head is fresh."""
    config = BertConfig.from_json(model_dir / "config.json")
    model = PairClassifier(config)
    state = {}
    for key, value in load_file(str(model_dir / "model.safetensors")).items():
        name = _rename(key)
        if name is not None:
            state[name] = value
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) != {"classifier.weight", "classifier.bias"}:
        raise ValueError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return model
