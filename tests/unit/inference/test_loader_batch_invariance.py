"""Batching never changes a verdict: only a model whose manifest declares it
batch-invariant is run in batches, each declaration holds bit for bit, and per-token
activation quantisation (modelwork/per_token_quant.py) is what would make the int8 graphs
batch-invariant - while the shipped per-call quantisation is not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort  # type: ignore[import-untyped]
import pytest

from streamproc.inference.loader import load_embedder, load_nli
from streamproc.inference.options import InferenceSettings
from streamproc.inference.registry import ModelRegistry

ROOT = Path(__file__).resolve().parents[3]
_TEXTS = [
    "Invoice 4500017311 was blocked.",
    "The supplier invoiced 100 pieces but only 90 were delivered on Wednesday morning.",
    "Payment is on hold until accounts payable confirms the goods receipt with the buyer.",
    "Yes.",
    "Photosynthesis converts light into chemical energy in the chloroplasts of plant cells.",
    "The meeting moved to Thursday at 3 pm in room 4.",
]
_PAIRS = [(premise, hypothesis) for premise in _TEXTS[1:4] for hypothesis in _TEXTS[::2]]


def _mixes(count: int) -> list[list[int]]:
    """Index orders that put each input among different, differently padded neighbours."""
    rng = np.random.default_rng(7)
    forward = list(range(count))
    return [forward, forward[::-1], *[list(rng.permutation(count)) for _ in range(3)]]


def test_a_model_not_declared_batch_invariant_runs_one_input_per_call() -> None:
    asked = InferenceSettings(
        nli_batch_size=8, embedding_batch_size=16, embedding_model="minilm-l6-v2-dq8"
    )
    registry = ModelRegistry(ROOT / "models")
    assert not registry.get(asked.nli_model).batch_invariant
    assert not registry.get(asked.embedding_model).batch_invariant
    assert load_nli(asked).batch_size == 1
    assert load_embedder(asked).batch_size == 1
    for declared in ("minilm-l6-v2-int8", "minilm-l6-v2-pt8"):
        batching = asked.model_copy(update={"embedding_model": declared})
        assert load_embedder(batching).batch_size == 16


def test_unreplayable_loading_batches_as_asked_and_the_vectors_move() -> None:
    """What measuring unsafe batching needs (modelwork/quantize_embedder.py --compare): the
    per-call int8 graph really batched, and its vectors moving with their neighbours."""
    asked = InferenceSettings(embedding_model="minilm-l6-v2-dq8", embedding_batch_size=6)
    embedder = load_embedder(asked, replayable=False)
    assert embedder.batch_size == 6
    alone = np.stack([embedder.embed([text])[0] for text in _TEXTS])
    assert np.abs(embedder.embed(_TEXTS) - alone).max() > 1e-4


def test_the_default_embedder_batches_and_is_declared_batch_invariant() -> None:
    default = InferenceSettings()
    assert ModelRegistry(ROOT / "models").get(default.embedding_model).batch_invariant
    assert load_embedder(default).batch_size == default.embedding_batch_size > 1


@pytest.mark.parametrize(
    "name", [m.name for m in ModelRegistry(ROOT / "models").manifests() if m.batch_invariant]
)
def test_every_batch_invariant_declaration_holds(name: str) -> None:
    registry = ModelRegistry(ROOT / "models")
    role = registry.get(name).role
    settings = InferenceSettings(
        nli_model=name if role == "nli" else InferenceSettings().nli_model,
        embedding_model=name if role == "embedding" else InferenceSettings().embedding_model,
        nli_batch_size=4,
        embedding_batch_size=4,
    )
    if role == "embedding":
        embedder = load_embedder(settings)
        alone = np.stack([embedder.embed([text])[0] for text in _TEXTS])
        for order in _mixes(len(_TEXTS)):
            batched = embedder.embed([_TEXTS[i] for i in order])
            np.testing.assert_array_equal(batched, alone[order])
    else:
        scorer = load_nli(settings)
        alone = np.stack([scorer.score_detailed([pair]).logits[0] for pair in _PAIRS])
        for order in _mixes(len(_PAIRS)):
            batched = scorer.score_detailed([_PAIRS[i] for i in order]).logits
            np.testing.assert_array_equal(batched, alone[order])


def test_the_registry_declares_at_least_one_batch_invariant_model() -> None:
    # Keeps the parametrised test above from passing by having nothing to check.
    assert any(m.batch_invariant for m in ModelRegistry(ROOT / "models").manifests())


# ------------------------------------------------------------------ per-token rewrite
def _logits(session: Any, model: Any, pairs: Sequence[tuple[str, str]], size: int) -> Any:
    from modelwork.per_token_quant import run_rows

    rows = model.tokenizer.encode_pairs(pairs)
    out = [run_rows(session, model, rows[i : i + size]) for i in range(0, len(rows), size)]
    return np.concatenate(out)


def test_per_token_quantisation_makes_the_verifier_batch_invariant(tmp_path: Path) -> None:
    pytest.importorskip("onnx")  # a dev dependency: CI has it
    from modelwork.per_token_quant import Model, rewrite

    source = "minilm-verifier-int8"
    registry = ModelRegistry(ROOT / "models")
    model = Model.load(registry, source, "logits")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    sessions = {
        "per call": registry.read_verified(registry.get(source).onnx)[0],
        "per token": rewrite(source, tmp_path / "per_token.onnx"),
    }
    changes = {}
    for kind, path in sessions.items():
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        alone = _logits(session, model, _PAIRS, 1)
        worst = 0.0
        for order in _mixes(len(_PAIRS)):
            batched = _logits(session, model, [_PAIRS[i] for i in order], 5)
            worst = max(worst, float(np.abs(batched - alone[order]).max()))
        changes[kind] = worst
        margins = alone[:, 1] - alone[:, 0]
        assert np.isfinite(margins).all()
    assert changes["per token"] == 0.0
    assert changes["per call"] > 1e-3  # the shipped graph does move with its neighbours


def test_a_token_budget_groups_short_texts_and_runs_long_ones_alone() -> None:
    settings = InferenceSettings(
        embedding_batch_size=4, embedding_batch_tokens=64, embedding_parallel_calls=2
    )
    embedder = load_embedder(settings)
    lengths = [100, *[10] * 8, 60]
    chunks = embedder._chunks(lengths)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(lengths)))
    assert [[lengths[i] for i in chunk] for chunk in chunks] == [
        [10, 10, 10, 10],
        [10, 10, 10, 10],
        [60],
        [100],  # over the budget by itself: alone, never cut
    ]
    # Two short texts fit one call, but two parallel slots would leave one idle.
    assert len(embedder._chunks([10, 10])) == 2
    # Whatever the grouping, each vector is the text's own (a batch-invariant model).
    texts = ["word " * 40, *_TEXTS]
    alone = np.stack([embedder.embed([text])[0] for text in texts])
    np.testing.assert_array_equal(embedder.embed(texts), alone)
