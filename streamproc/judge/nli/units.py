"""Evidence units as the NLI judge reads them: statements only, and one vector per unit
with a window's vector made from its sentences' (the windows would otherwise double the
texts to embed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from streamproc.judge.text.claims import split_sentences
from streamproc.judge.text.evidence import EvidenceUnit

__all__ = ["statements_only", "unit_vectors", "window_members"]


def window_members(units: Sequence[EvidenceUnit]) -> dict[int, list[int]]:
    """Window unit index -> its sentence units' indices, for windows fully covered."""
    sentences = {(u.evidence_id, u.first): i for i, u in enumerate(units) if not u.is_window}
    members: dict[int, list[int]] = {}
    for index, unit in enumerate(units):
        if unit.is_window:
            found = [sentences.get((unit.evidence_id, k)) for k in range(unit.first, unit.last + 1)]
            if found and all(f is not None for f in found):
                members[index] = [f for f in found if f is not None]
    return members


def unit_vectors(
    units: Sequence[EvidenceUnit], vectors: NDArray[np.float32], index: Mapping[str, int]
) -> NDArray[np.float32]:
    """One unit-length row per unit: a sentence's own embedding (``vectors[index[text]]``),
    a window's the normalised mean of its sentences' rows. A unit left off the shortlist
    (its text not in ``index``) keeps a zero row and is never ranked."""
    members = window_members(units)
    rows = np.zeros((len(units), vectors.shape[1]), dtype=np.float32)
    for i, unit in enumerate(units):
        if i not in members and unit.text in index:
            rows[i] = vectors[index[unit.text]]
    for i, parts in members.items():
        mean = rows[parts].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        rows[i] = mean / norm if norm else mean
    return rows


def statements_only(units: list[EvidenceUnit]) -> list[EvidenceUnit]:
    """The question counts as evidence only where it states something ("the order is
    1.5 percent over the limit"); a question sentence asserts nothing for NLI to entail."""
    out = []
    for unit in units:
        if unit.kind != "question":
            out.append(unit)
            continue
        for start, end in split_sentences(unit.text):
            sentence = unit.text[start:end].strip()
            if sentence and not sentence.endswith("?"):
                out.append(EvidenceUnit(unit.evidence_id, "question", sentence, 0, 0))
    return out
