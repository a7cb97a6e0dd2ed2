"""Tokenise texts and (premise, hypothesis) pairs into padded int64 batches.

A tokenizer.json often presets fixed padding (e.g. to 160) and truncation; both are
turned off here. Rows are padded per batch to the longest one, and truncation happens
only at the model's max length and is reported per row, never silently: the judge keeps
premises short by retrieval, so a cut premise is something to see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from tokenizers import Encoding, Tokenizer

from streamproc.inference.manifest import ModelInputs

__all__ = ["Batch", "Encoded", "TextTokenizer"]

_PAD_TOKENS = ("[PAD]", "<pad>")


@dataclass(frozen=True, slots=True)
class Encoded:
    """One tokenised row, before padding."""

    ids: list[int]
    type_ids: list[int]
    truncated: bool

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True, slots=True)
class Batch:
    """Rows padded to one length, ready to feed a graph."""

    input_ids: NDArray[np.int64]
    attention_mask: NDArray[np.int64]
    token_type_ids: NDArray[np.int64]

    def feeds(self, inputs: ModelInputs) -> dict[str, NDArray[np.int64]]:
        """The arrays under the graph's input names."""
        feeds = {inputs.input_ids: self.input_ids, inputs.attention_mask: self.attention_mask}
        if inputs.token_type_ids is not None:
            feeds[inputs.token_type_ids] = self.token_type_ids
        return feeds


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` with preset padding and truncation removed.

    Build it with ``from_json``; ``_full`` never truncates (to learn true lengths), and
    ``_cut`` re-encodes only the rows longer than ``max_length``, with the library's
    longest-first strategy so special tokens stay in place.
    """

    def __init__(self, full: Tokenizer, cut: Tokenizer, max_length: int, pad_id: int) -> None:
        self._full = full
        self._cut = cut
        self.max_length = max_length
        self.pad_id = pad_id

    @classmethod
    def from_json(cls, text: str, max_length: int) -> TextTokenizer:
        """From the contents of a tokenizer.json (already verified by the caller)."""
        full = Tokenizer.from_str(text)
        pad_id = _pad_id(full)
        full.no_padding()
        full.no_truncation()
        cut = Tokenizer.from_str(text)
        cut.no_padding()
        cut.enable_truncation(max_length, strategy="longest_first")
        return cls(full, cut, max_length, pad_id)

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[Encoded]:
        """Each (premise, hypothesis) as one row; over-long rows are cut and flagged."""
        return self._encode([(premise, hypothesis) for premise, hypothesis in pairs])

    def encode_texts(self, texts: Sequence[str]) -> list[Encoded]:
        """Each text as one row; over-long rows are cut and flagged."""
        return self._encode(list(texts))

    def pad(self, rows: Sequence[Encoded], length: int | None = None) -> Batch:
        """Rows padded to ``length``, or to the longest row when ``length`` is None."""
        width = length if length is not None else max((len(row) for row in rows), default=0)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            size = len(row)
            if size > width:
                raise ValueError(f"row {index} has {size} tokens, more than the width {width}")
            ids[index, :size] = row.ids
            mask[index, :size] = 1
            types[index, :size] = row.type_ids
        return Batch(input_ids=ids, attention_mask=mask, token_type_ids=types)

    def _encode(self, inputs: list[str] | list[tuple[str, str]]) -> list[Encoded]:
        encodings = self._full.encode_batch_fast(inputs)
        long = [index for index, item in enumerate(encodings) if len(item.ids) > self.max_length]
        if long:
            cut = self._cut.encode_batch_fast([inputs[index] for index in long])
            for index, item in zip(long, cut, strict=True):
                encodings[index] = item
        marked = set(long)
        return [_row(item, index in marked) for index, item in enumerate(encodings)]


def _row(encoding: Encoding, truncated: bool) -> Encoded:
    return Encoded(ids=encoding.ids, type_ids=encoding.type_ids, truncated=truncated)


def _pad_id(tokenizer: Tokenizer) -> int:
    """The pad id the tokenizer.json declares, else a conventional pad token's id."""
    padding = tokenizer.padding
    if padding and isinstance(padding.get("pad_id"), int):
        return int(padding["pad_id"])
    for token in _PAD_TOKENS:
        found = tokenizer.token_to_id(token)
        if found is not None:
            return found
    return 0
