"""The MiniLM embedders: unit rows, sensible similarities, and a text's vector that does
not depend on the batch it was embedded in. The default int8 graph (minilm-l6-v2-pt8)
quantises activations per token row, is declared batch-invariant and embeds in batches;
the other int8 graphs (the 6-layer minilm-l6-v2-dq8 and the distilled 3-layer
minilm-l3-embedder-dq8) quantise activations per call, so they embed one text per call;
the package's graph (minilm-l6-v2-int8) runs in float, is declared batch-invariant and
batches (padding is masked out of attention and the mean: not even the rounding
changes)."""

from __future__ import annotations

import numpy as np
import pytest

from streamproc.inference.embeddings import OnnxEmbedder, mean_pool
from streamproc.inference.loader import load_embedder
from streamproc.inference.options import InferenceSettings

_TEXTS = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The invoice was blocked for payment.",
    "Payment of the invoice was put on hold.",
    "Photosynthesis converts light into chemical energy.",
]


INT8_EMBEDDERS = ["minilm-l6-v2-pt8", "minilm-l6-v2-dq8", "minilm-l3-embedder-dq8"]
PER_TOKEN = {"minilm-l6-v2-pt8"}  # activations quantised per token row: batches
FLOOR_STUDENT = 0.75  # the student's lowest cosine on these five texts is 0.79
FLOOR_FULL = {"minilm-l6-v2-pt8": 0.98, "minilm-l6-v2-dq8": 0.95}


@pytest.fixture(scope="module", params=INT8_EMBEDDERS)
def embedder(request: pytest.FixtureRequest) -> OnnxEmbedder:
    return load_embedder(InferenceSettings(embedding_model=request.param, embedding_batch_size=4))


@pytest.fixture(scope="module")
def float_graph() -> OnnxEmbedder:
    return load_embedder(
        InferenceSettings(embedding_model="minilm-l6-v2-int8", embedding_batch_size=4)
    )


def test_identity_and_shape(embedder: OnnxEmbedder) -> None:
    assert embedder.model_name in INT8_EMBEDDERS
    if embedder.model_name in PER_TOKEN:
        assert embedder.batch_size == 4, "declared batch-invariant: batches as asked"
    else:
        assert embedder.batch_size == 1, "activations quantised per call: one text per call"
    assert embedder.sha256 == embedder.manifest.onnx.sha256
    assert embedder.max_length == 256
    vectors = embedder.embed(_TEXTS)
    assert vectors.shape == (len(_TEXTS), 384)
    assert vectors.dtype == np.float32
    assert embedder.embed([]).shape == (0, 384)


def test_rows_have_unit_norm(embedder: OnnxEmbedder) -> None:
    norms = np.linalg.norm(embedder.embed([*_TEXTS, ""]), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated(embedder: OnnxEmbedder) -> None:
    guitar, music, blocked, on_hold, leaves = embedder.embed(_TEXTS)
    assert guitar @ music > guitar @ blocked + 0.3
    assert blocked @ on_hold > blocked @ leaves + 0.3
    assert blocked @ on_hold > on_hold @ music


def test_same_vector_alone_or_in_a_batch(embedder: OnnxEmbedder) -> None:
    batch = embedder.embed([*_TEXTS, *_TEXTS[::-1]])  # padded batches, or one text per call
    for index, text in enumerate(_TEXTS):
        np.testing.assert_array_equal(embedder.embed([text])[0], batch[index])


def test_the_float_graph_batches_and_stays_batch_invariant(float_graph: OnnxEmbedder) -> None:
    assert float_graph.batch_size == 4
    batch = float_graph.embed(_TEXTS)  # two micro-batches of 3 and 2, padded per batch
    for index, text in enumerate(_TEXTS):
        np.testing.assert_array_equal(float_graph.embed([text])[0], batch[index])


def test_int8_vectors_stay_close_to_the_float_graphs(
    embedder: OnnxEmbedder, float_graph: OnnxEmbedder
) -> None:
    """The int8 graphs of the full model stay next to the float one (per-token scales
    closer than per-call ones); the distilled student, which learned the float model's
    vectors with half its layers, stays close enough to rank like it
    (scripts/compare_embedders.py, a one-off since removed, measured
    the rankings: CHANGELOG.md)."""
    floor = FLOOR_FULL.get(embedder.model_name, FLOOR_STUDENT)
    cosines = (embedder.embed(_TEXTS) * float_graph.embed(_TEXTS)).sum(axis=1)
    assert cosines.min() > floor, cosines


def test_long_texts_report_truncation(embedder: OnnxEmbedder) -> None:
    result = embedder.embed_detailed(["word " * 400, "short"])
    assert result.truncated == (True, False)
    assert result.truncated_count == 1
    assert embedder.truncated_total >= 1
    assert np.linalg.norm(result.vectors[0]) == pytest.approx(1.0, abs=1e-5)


def test_the_default_is_one_of_them() -> None:
    assert InferenceSettings().embedding_model in INT8_EMBEDDERS


def test_mean_pool_ignores_masked_positions() -> None:
    states = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    np.testing.assert_allclose(mean_pool(states, mask), [[2.0, 3.0]])
