"""A claim's typed values against the records' typed fields, one value type at a time.

Each value the claim states (:mod:`.claim_values`) is looked up among the fields of its
type (:mod:`.case_facts`): a field that holds it confirms it; a value the evidence writes
elsewhere (a policy's "EUR 500", the question), or works out from the records (a sum of
two amounts, a recorded date plus a period the evidence names) is no finding; a value
nothing holds, where the records do hold values of its type, is a mismatch with its
reason code: AMOUNT_MISMATCH, IDENTIFIER_MISMATCH, DATE_MISMATCH, TIME_MISMATCH,
COUNT_MISMATCH, NAME_MISMATCH. Comparisons are by type: amounts at the claim's
precision and in its currency, dates by the parts written, times as 12- or 24-hour
readings, identifiers exactly (one transposed digit is another id), names word by word.

One module a value type (:mod:`._id_checks`, :mod:`._money_checks`, :mod:`._count_checks`,
:mod:`._date_checks`, :mod:`._name_checks`), each writing its findings to the claim's
:class:`~._value_findings.ValueFindings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamproc.judge.records._count_checks import check_counts
from streamproc.judge.records._date_checks import (
    bare_day,
    check_dates,
    lead_ins,
    names_a_date_key,
    recurring,
)
from streamproc.judge.records._id_checks import check_ids
from streamproc.judge.records._money_checks import check_money
from streamproc.judge.records._name_checks import check_names
from streamproc.judge.records._value_findings import ValueFindings
from streamproc.judge.records.case_facts import CaseFacts
from streamproc.judge.records.claim_values import ClaimValues
from streamproc.judge.records.dates import DateMention
from streamproc.judge.records.durations import durations
from streamproc.judge.records.findings import RecordFinding

__all__ = ["ValueCheck", "check_values"]


@dataclass(frozen=True, slots=True)
class ValueCheck:
    mismatch: RecordFinding | None = None
    confirmations: tuple[RecordFinding, ...] = ()
    unconfirmed: int = 0  # values nothing confirmed (found in a text at most)


def check_values(
    values: ClaimValues,
    facts: CaseFacts,
    stems: frozenset[str],
    claim: str = "",
    *,
    reports_fact: bool = True,
    promised: Callable[[DateMention], bool] | None = None,
    deeds: frozenset[str] = frozenset(),
) -> ValueCheck:
    """Every typed value of one claim against the records; the first mismatch wins.

    A time may be a recorded one moved by a period the claim writes ("in 30 minutes"),
    or - when the claim rounds ("should open again at about 16:01") - by one the evidence
    writes (a 30-minute lock). A bare relative day ("today") is read only in a claim that
    reports something done or a state ("it was delivered today"), not in advice ("it's
    worth calling them today"). ``deeds`` are the stems of the verbs the claim reports
    done: a count is read against the fields named for them. A claim that names a recorded
    date by its key ("its due date is tomorrow") has its bare relative day read whatever
    its mood ("PostNL expects to deliver it tomorrow")."""
    result = ValueFindings(facts)
    periods = set(durations(claim, offsets=True))
    check_ids(values.ids, facts, result)
    check_money(values.money, facts, stems, result)
    check_counts(values.counts, facts, deeds, result)
    keyed = any(m.relative and bare_day(m) for m in values.dates) and names_a_date_key(stems, facts)
    mentions = [
        m
        for m in values.dates
        if not recurring(claim, m)
        and not (
            m.relative
            and bare_day(m)
            and not keyed
            and (not reports_fact or (promised is not None and promised(m)))
        )
    ]
    check_dates(mentions, facts, stems, result, periods, claim, lead_ins(claim, values.dates))
    check_names(values.names, facts, result, claim)
    return ValueCheck(result.mismatch, tuple(result.confirmations), result.unconfirmed)
