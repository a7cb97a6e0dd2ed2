"""A claim's amounts against the records' amounts, at the claim's precision and in its
currency (AMOUNT_MISMATCH where the records hold amounts and none is it)."""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.judge.records._value_findings import ValueFindings, mismatch, nearest
from streamproc.judge.records.case_facts import CaseFacts, FieldRef
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.records.money import Money

__all__ = ["check_money"]


def check_money(
    amounts: Sequence[tuple[Money, int, int]],
    facts: CaseFacts,
    stems: frozenset[str],
    result: ValueFindings,
) -> None:
    for money, _, _ in amounts:
        known = facts.money_known(money)
        if isinstance(known, FieldRef):
            result.confirm(known, money.written)
        elif known:
            result.unconfirmed += 1
        elif facts.carries_money:
            candidates = [t for _, _, t in facts.money]
            result.fail(
                mismatch(
                    RecordReason.AMOUNT_MISMATCH, money.written, "amount",
                    nearest(candidates, stems),
                )
            )  # fmt: skip
