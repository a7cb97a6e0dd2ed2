"""Citation recall and precision for one claim, as in the course's ``check_case`` (after ALCE).

Recall: the cited evidence (plus the question) alone supports the claim. Precision, per
citation: it counts when the claim passes recall and the citation is needed - it
supports the claim alone, or the other citations do not without it. Pure: the caller
says which evidence subsets support the claim, so all checks can be batched first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CitationResult", "assess_citations", "citation_subsets"]

EvidenceSubset = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CitationResult:
    """``supported`` is None when the answer uses no citations at all (nothing to grade);
    ``needed`` has one flag per citation as written."""

    supported: bool | None
    needed: tuple[bool, ...]


def _others(resolved: Sequence[str | None], cid: str | None) -> EvidenceSubset:
    return tuple(dict.fromkeys(o for o in resolved if o is not None and o != cid))


def citation_subsets(resolved: Sequence[str | None]) -> list[EvidenceSubset]:
    """Every evidence subset :func:`assess_citations` will ask about, for batching.

    ``resolved`` has one entry per citation: the evidence id, or None if it names nothing.
    """
    cited = _others(resolved, None)
    if not cited:
        return []
    subsets = [cited]
    for cid in resolved:
        if cid is not None:
            subsets.append((cid,))
            if others := _others(resolved, cid):
                subsets.append(others)
    return list(dict.fromkeys(subsets))


def assess_citations(
    resolved: Sequence[str | None],
    uses_citations: bool,
    supports: Callable[[EvidenceSubset], bool],
) -> CitationResult:
    """Grade one claim's citations; ``supports(ids)``: does that evidence back the claim?

    A claim without citations in an answer that cites elsewhere fails recall (ALCE
    counts it as 0); in an answer without any citation, recall is not applicable.
    """
    if not resolved:
        return CitationResult(supported=False if uses_citations else None, needed=())
    cited = _others(resolved, None)
    cited_ok = bool(cited) and supports(cited)
    needed = []
    for cid in resolved:
        if cid is None:
            needed.append(False)  # names no evidence item: cannot pull any weight
            continue
        alone = supports((cid,))
        others = _others(resolved, cid)
        without = bool(others) and supports(others)
        needed.append(cited_ok and (alone or not without))
    return CitationResult(supported=cited_ok, needed=tuple(needed))
