"""``PairScorer`` on an ONNX NLI cross-encoder.

Pairs are sorted by token length before batching, so each micro-batch is padded only to
its own longest pair (little padding, fewer wasted FLOPs), then scores are put back in
input order. Logits become entailment/contradiction exactly as the manifest declares.
The default is one pair per call, two calls side by side (``OnnxBackend``): a pair's
score never depends on its neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from streamproc.inference._backend import OnnxBackend
from streamproc.inference.manifest import MarginOutput, ModelManifest, SoftmaxOutput
from streamproc.inference.onnx_session import OnnxModel
from streamproc.inference.tokenize import Encoded, TextTokenizer
from streamproc.judge.protocols import NliScore

__all__ = ["NliResult", "OnnxNliScorer", "scores_from_logits"]


@dataclass(frozen=True, slots=True)
class NliResult:
    """Scores and raw logits in input order, and which pairs were cut to fit."""

    scores: list[NliScore]
    logits: NDArray[np.float32]
    truncated: tuple[bool, ...]

    @property
    def truncated_count(self) -> int:
        return sum(self.truncated)


class OnnxNliScorer(OnnxBackend):
    """An NLI model behind ``PairScorer``. Built by ``loader.load_nli``; the constructor
    only takes already-loaded parts."""

    def __init__(
        self,
        model: OnnxModel,
        tokenizer: TextTokenizer,
        manifest: ModelManifest,
        sha256: str,
        *,
        batch_size: int,
        parallel_calls: int = 1,
    ) -> None:
        output = manifest.output
        if not isinstance(output, MarginOutput | SoftmaxOutput):
            raise ValueError(f"model {manifest.name!r} is not an NLI model ({output.kind})")
        super().__init__(
            model,
            tokenizer,
            manifest,
            sha256,
            output_name=output.output_name,
            batch_size=batch_size,
            parallel_calls=parallel_calls,
        )
        self._output = output

    @property
    def fixed_length(self) -> int | None:
        """Set when every batch is padded to the graph's pinned length."""
        return self._model.fixed_length

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        """Scores for (premise, hypothesis) pairs, in input order, each saying whether
        the pair had to be truncated to fit the model."""
        result = self.score_detailed(pairs)
        return [
            replace(score, truncated=cut)
            for score, cut in zip(result.scores, result.truncated, strict=True)
        ]

    def score_detailed(self, pairs: Sequence[tuple[str, str]]) -> NliResult:
        """Scores plus raw logits and per-pair truncation flags."""
        if not pairs:
            return NliResult([], np.zeros((0, 0), dtype=np.float32), ())
        rows = self._tokenizer.encode_pairs(pairs)
        logits = self._logits(rows)
        truncated = tuple(row.truncated for row in rows)
        self.truncated_total += sum(truncated)
        return NliResult(scores_from_logits(logits, self._output), logits, truncated)

    def _logits(self, rows: list[Encoded]) -> NDArray[np.float32]:
        chunks = self._chunks([len(row) for row in rows])
        outputs = self._map_calls(self._run, [[rows[i] for i in chunk] for chunk in chunks])
        result: NDArray[np.float32] | None = None
        for chunk, out in zip(chunks, outputs, strict=True):
            if result is None:
                result = np.empty((len(rows), out.shape[1]), dtype=np.float32)
            result[chunk] = out
        assert result is not None  # rows is never empty here
        return result

    def _run(self, rows: list[Encoded]) -> NDArray[np.float32]:
        """One model call on one micro-batch: its logits, checked against the manifest."""
        batch = self._tokenizer.pad(rows, self._model.fixed_length)
        out = self._model.run(batch.feeds(self._model.inputs), self._output.output_name)
        if out.ndim != 2 or not self._output.accepts(out.shape[1]):
            raise ValueError(
                f"model {self.model_name!r} returned logits of shape {out.shape}, "
                f"which its {self._output.kind} output mapping cannot read"
            )
        return out


def scores_from_logits(
    logits: NDArray[np.float32], output: MarginOutput | SoftmaxOutput
) -> list[NliScore]:
    """One ``NliScore`` per row of logits, read the way the manifest declares."""
    values = logits.astype(np.float64)
    if isinstance(output, MarginOutput):
        margin = values[:, output.positive_index] - values[:, output.negative_index]
        contradiction = _sigmoid(output.steepness * (margin - output.contradiction_above))
        entailment = _sigmoid(output.steepness * (margin - output.entailment_above)) * (
            1.0 - contradiction
        )
    else:
        shifted = np.exp(values - values.max(axis=1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=1, keepdims=True)
        entailment = probabilities[:, output.labels.index(output.entailment_label)]
        contradiction = probabilities[:, output.labels.index(output.contradiction_label)]
    return [
        NliScore(float(e), float(c), tuple(float(x) for x in row))
        for e, c, row in zip(entailment, contradiction, logits, strict=True)
    ]


def _sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
    # tanh form: no overflow warning for large |x|.
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)
