"""Deterministic stand-ins for the two models, so the NLI judge's logic is tested
without ONNX Runtime: a bag-of-words embedder and an overlap-based 'NLI' scorer."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from streamproc.judge import NliScore
from streamproc.judge.text.features import content_words
from streamproc.judge.text.negation import is_negated

_DIM = 256


class BagOfWordsEmbedder:
    model_name = "fake-embedder"
    sha256 = "0" * 64

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        rows = np.zeros((len(texts), _DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in content_words(text):
                rows[row, int(hashlib.sha1(word.encode()).hexdigest(), 16) % _DIM] += 1.0
            norm = float(np.linalg.norm(rows[row]))
            rows[row] = rows[row] / norm if norm else rows[row]
        return rows


class OverlapScorer:
    """Entailment = share of the hypothesis' content words in the premise; a premise
    that says "contradicts" in the test fixtures contradicts. Counts its calls."""

    model_name = "fake-nli"
    sha256 = "1" * 64

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.pairs: list[list[tuple[str, str]]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        self.calls.append(len(pairs))
        self.pairs.append(list(pairs))
        out = []
        for premise, hypothesis in pairs:
            words = content_words(hypothesis)
            cover = len(words & content_words(premise)) / len(words) if words else 1.0
            same_polarity = is_negated(premise) == is_negated(hypothesis)
            entail = cover if same_polarity else 0.1
            contra = 0.95 if "CONTRADICTS" in premise else 0.05
            out.append(NliScore(entailment=entail, contradiction=contra, logits=(0.0, 0.0)))
        return out
