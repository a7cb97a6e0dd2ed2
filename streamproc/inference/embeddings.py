"""``TextEmbedder`` on an ONNX sentence encoder (mean pooling, then L2 norm).

Texts are sorted by token length and batched, so padding stays small; the attention
mask keeps padding out of the mean, so a text's vector does not depend on its batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamproc.inference._backend import OnnxBackend
from streamproc.inference.manifest import EmbeddingOutput, ModelManifest
from streamproc.inference.onnx_session import OnnxModel
from streamproc.inference.tokenize import Encoded, TextTokenizer

__all__ = ["EmbeddingResult", "OnnxEmbedder", "mean_pool"]

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """Vectors in input order, and which texts were cut to fit."""

    vectors: NDArray[np.float32]
    truncated: tuple[bool, ...]

    @property
    def truncated_count(self) -> int:
        return sum(self.truncated)


class OnnxEmbedder(OnnxBackend):
    """A sentence-embedding model behind ``TextEmbedder``. Built by
    ``loader.load_embedder``; the constructor only takes already-loaded parts."""

    def __init__(
        self,
        model: OnnxModel,
        tokenizer: TextTokenizer,
        manifest: ModelManifest,
        sha256: str,
        *,
        batch_size: int,
        parallel_calls: int = 1,
        batch_tokens: int | None = None,
    ) -> None:
        output = manifest.output
        if not isinstance(output, EmbeddingOutput):
            raise ValueError(f"model {manifest.name!r} is not an embedding model ({output.kind})")
        super().__init__(
            model,
            tokenizer,
            manifest,
            sha256,
            output_name=output.output_name,
            batch_size=batch_size,
            parallel_calls=parallel_calls,
            batch_tokens=batch_tokens,
        )
        self._output = output

    @property
    def dimension(self) -> int:
        return self._output.dimension

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Shape (len(texts), dimension), unit rows, in input order."""
        return self.embed_detailed(texts).vectors

    def embed_detailed(self, texts: Sequence[str]) -> EmbeddingResult:
        """Vectors plus per-text truncation flags."""
        vectors = np.zeros((len(texts), self._output.dimension), dtype=np.float32)
        if not texts:
            return EmbeddingResult(vectors, ())
        rows = self._tokenizer.encode_texts(texts)
        chunks = self._chunks([len(row) for row in rows])
        outputs = self._map_calls(self._run, [[rows[i] for i in chunk] for chunk in chunks])
        for chunk, pooled in zip(chunks, outputs, strict=True):
            vectors[chunk] = pooled
        truncated = tuple(row.truncated for row in rows)
        self.truncated_total += sum(truncated)
        return EmbeddingResult(vectors, truncated)

    def _run(self, rows: list[Encoded]) -> NDArray[np.float32]:
        batch = self._tokenizer.pad(rows, self._model.fixed_length)
        states = self._model.run(batch.feeds(self._model.inputs), self._output.output_name)
        if states.ndim != 3 or states.shape[2] != self._output.dimension:
            raise ValueError(
                f"model {self.model_name!r} returned states of shape {states.shape}, "
                f"expected (batch, sequence, {self._output.dimension})"
            )
        pooled = mean_pool(states, batch.attention_mask)
        if self._output.normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), _EPS)
        return pooled


def mean_pool(states: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """Mean of each row's token states over the positions its attention mask keeps."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (states * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), _EPS)
    return np.asarray(summed / counts, dtype=np.float32)
