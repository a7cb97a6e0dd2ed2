"""Amounts a reader works out from the records rather than reads in one field: sums and
differences of two or three recorded amounts, an amount times a small recorded count,
and what a refused call asked for beside them. A claim's amount that is one of them is
no mismatch."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from itertools import combinations
from typing import Final

__all__ = ["combined_amounts", "derived_amounts"]

_MAX_DERIVED: Final = 40  # money values combined pairwise (sums, differences)


def combined_amounts(
    first: Sequence[tuple[Decimal, str | None]], second: Sequence[tuple[Decimal, str | None]]
) -> frozenset[tuple[Decimal, str | None]]:
    """The values of ``first`` and their sums and differences with ``second``'s."""
    out = set(first)
    for a, _ in first[:_MAX_DERIVED]:
        for b, _ in second[:_MAX_DERIVED]:
            out |= {(a + b, None), (abs(a - b), None)}
    return frozenset(out)


def derived_amounts(
    money: Sequence[tuple[Decimal, str | None, object]],
    quantities: Sequence[tuple[Decimal, object]],
) -> frozenset[tuple[Decimal, str | None]]:
    """Amounts a reader works out from the records, with their currency (None when the
    two differ or none is known): the sum or difference of two amounts, an amount times
    a small count ("4 x 38.50")."""
    values = list(dict.fromkeys((abs(v), c) for v, c, _ in money))[:_MAX_DERIVED]
    out: set[tuple[Decimal, str | None]] = set()
    for (a, ca), (b, cb) in combinations(values, 2):
        currency = ca if ca == cb else None
        out |= {(a + b, currency), (abs(a - b), currency)}
    out |= _three_amounts(values)
    counts = [q for q, _ in quantities if 0 < q <= 100][:20]
    out |= {(v * n, c) for v, c in values for n in counts}  # 4 x 38.50
    out |= {(v / n, c) for v, c in values for n in counts if n != 1}  # 273 for 3.5 hours
    return frozenset(out)


_MAX_SUMMED: Final = 16  # amounts combined three at a time: 2,240 sums at most


def _three_amounts(
    amounts: Sequence[tuple[Decimal, str | None]],
) -> set[tuple[Decimal, str | None]]:
    """Three recorded amounts added or taken away: two refunded lines less the return
    shipping (349.00 + 25.90 - 4.95), an invoice less a credit note and a down payment
    recorded apart (3,867.50 - 581.91 - 1,000.00)."""
    out: set[tuple[Decimal, str | None]] = set()
    for (a, ca), (b, cb), (c, cc) in combinations(amounts[:_MAX_SUMMED], 3):
        currency = ca if ca == cb == cc else None
        for total in (a + b + c, abs(a + b - c), abs(a - b + c), abs(a - b - c)):
            if total:
                out.add((total, currency))
    return out
