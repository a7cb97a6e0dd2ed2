"""Level 2a: deterministic record checks for claims about this case.

NLI reads "$118.84" and "$118.48" as the same and cannot see a state machine, so an id,
an amount or a state that a record field can settle is read, not inferred. A finding
carries its reason code and the verdict it implies; a record that *confirms* a value is
a finding too, so token confidence can accept a shaky number the record carries.

Conservative on purpose: a false alarm trims a correct sentence in front of a user, so
the check says nothing (None) unless the claim is plainly a report about this case
("your order", "I have refunded", an order number) and a field plainly settles it.
Policy-like sentences ("Refunds over EUR 500 need approval", "Orders are shipped
within 2 days") are left to NLI.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Final

from streamproc.events import EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.judge.rules.confidence import specific_spans
from streamproc.judge.text.evidence import FieldLeaf, readable_field, record_leaves
from streamproc.judge.text.features import numbers, word_set

__all__ = [
    "RecordFinding",
    "RecordReason",
    "check_record",
    "confirmed_by_records",
    "confirmed_values",
    "parse_amount",
]


class RecordReason(StrEnum):
    CLAIM_WITHOUT_TOOL_EVIDENCE = "CLAIM_WITHOUT_TOOL_EVIDENCE"
    IDENTIFIER_MISMATCH = "IDENTIFIER_MISMATCH"
    AMOUNT_MISMATCH = "AMOUNT_MISMATCH"
    RECORD_STATE_MISMATCH = "RECORD_STATE_MISMATCH"
    NOT_EXECUTED = "NOT_EXECUTED"
    RECORD_CONFIRMED = "RECORD_CONFIRMED"


@dataclass(frozen=True, slots=True)
class RecordFinding:
    """What a record says about one claim.

    ``verdict`` is what the finding implies for the whole claim: contradicted for a
    mismatch or a refused call, unsupported for a case claim with no record at all, and
    None for a confirmation (one value is right; the rest of the claim still needs
    checking). ``field`` is the record field as written (``order.status``).
    """

    reason: RecordReason
    verdict: VerdictLabel | None
    detail: str
    evidence_id: str | None = None
    field: str | None = None
    claim_value: str | None = None
    record_value: str | None = None

    @property
    def confirmed(self) -> bool:
        return self.reason is RecordReason.RECORD_CONFIRMED

    @property
    def reason_text(self) -> str:
        """``CODE: detail``, the shape of the judge's reason strings."""
        return f"{self.reason.value}: {self.detail}"


# ----------------------------------------------------------------------------- amounts

_CURRENCY_SYMBOLS: Final[Mapping[str, str]] = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CURRENCY_WORDS: Final[Mapping[str, str]] = {
    "euro": "EUR", "euros": "EUR", "dollar": "USD", "dollars": "USD",
    "pound": "GBP", "pounds": "GBP",
}  # fmt: skip
_CODES = "EUR|USD|GBP|CHF|JPY|INR|CAD|AUD|SEK|NOK|DKK|PLN|CNY"
# At most 32 characters: an amount is tried from every digit of a run, and an unbounded
# one would rescan a long run of digits from each of them.
_NUM = r"\d[\d.,]{0,30}\d|\d"
_SYMBOL = r"[$€£¥]"
_CLAIM_AMOUNT = re.compile(
    rf"(?P<cur1>{_SYMBOL}|\b(?:{_CODES})\b)\s?(?P<num1>{_NUM})"
    rf"|(?P<num2>{_NUM})\s?(?P<cur2>{_SYMBOL}|(?:{_CODES})\b|(?:euros?|dollars?|pounds?)\b)"
    rf"|\b(?:amount|total|price|cost|balance|charge|fee|sum)\s+(?:of\s+|is\s+|was\s+|:\s*)?"
    rf"(?P<num3>(?:{_SYMBOL}\s?)?(?:{_NUM})(?:\s?(?:{_SYMBOL}|(?:{_CODES})\b"
    r"|(?:euros?|dollars?|pounds?)\b))?)"
    rf"|\b(?:quantity|qty)\s+(?:of\s+|is\s+|was\s+|:\s*)?(?P<qty1>\d+)\b"
    r"|\b(?P<qty2>\d+)\s+(?:units?|items?|pieces?|pcs|boxes|packages|parcels|seats"
    r"|licen[cs]es)\b",
    re.IGNORECASE,
)
# Before an amount these make it a limit or a rule, not this case's figure. Looked for in
# the last _LOOKBACK characters (``pos`` keeps the text before visible to ``\b``):
# searching all the text before each amount costs its length per amount.
_LOOKBACK: Final = 64
_LIMIT_BEFORE = re.compile(
    r"\b(?:over|above|under|below|up to|more than|less than|at least|at most|exceeds?|exceeding"
    r"|maximum|minimum|max|min|limit|per|than)\s*(?:of\s*)?$",
    re.IGNORECASE,
)
_MONEY_FIELD_WORDS: Final = word_set(
    "amount total subtotal price cost sum refund charge fee balance paid due credit tax "
    "discount net gross"
)
_QUANTITY_FIELD_WORDS: Final = word_set("quantity qty units count pieces")


def parse_amount(text: str) -> tuple[Decimal, str | None] | None:
    """ "€1,200.00" -> (1200, "EUR"); "102,50 EUR" -> (102.50, "EUR"); "7" -> (7, None).

    The last of "," / "." is the decimal mark when both appear; a lone "," followed by
    exactly three digits groups thousands, otherwise it is the decimal mark.
    """
    text = text.strip()
    currency = None
    for symbol, code in _CURRENCY_SYMBOLS.items():
        if symbol in text:
            currency, text = code, text.replace(symbol, "")
    code_match = re.search(rf"\b({_CODES})\b", text, re.IGNORECASE)
    if code_match:
        currency, text = code_match[1].upper(), text.replace(code_match[0], "")
    word = re.search(r"\b(euros?|dollars?|pounds?)\b", text, re.IGNORECASE)
    if word:
        currency, text = _CURRENCY_WORDS[word[1].lower()], text.replace(word[0], "")
    text = text.strip()
    if not re.fullmatch(r"-?\d[\d.,]*", text) or text.endswith((",", ".")):
        return None
    if "," in text and "." in text:
        mark = max(text.rfind(","), text.rfind("."))
        digits = re.sub(r"[.,]", "", text[:mark]) + "." + text[mark + 1 :]
    elif "," in text:
        grouped = re.fullmatch(r"-?\d{1,3}(?:,\d{3})+", text)
        digits = text.replace(",", "") if grouped else text.replace(",", ".")
    elif text.count(".") > 1:
        digits = text.replace(".", "")
    else:
        digits = text
    try:
        return Decimal(digits), currency
    except InvalidOperation:
        return None


@dataclass(frozen=True, slots=True)
class _Amount:
    value: Decimal
    currency: str | None
    written: str
    quantity: bool  # "3 units", not money


def _claim_amounts(claim: str) -> list[_Amount]:
    found = []
    for match in _CLAIM_AMOUNT.finditer(claim):
        if _LIMIT_BEFORE.search(claim, max(0, match.start() - _LOOKBACK), match.start()):
            continue
        quantity = match["qty1"] or match["qty2"]
        written = (match["num3"] or match[0]).strip()
        parsed = parse_amount(quantity if quantity is not None else written)
        if parsed is not None:
            found.append(_Amount(parsed[0], parsed[1], written, quantity is not None))
    return found


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class _Record:
    """One record/tool result as the checks read it."""

    item: EvidenceItem
    leaves: tuple[FieldLeaf, ...]

    @property
    def executed(self) -> bool:
        return self.item.executed is not False

    def words(self, leaf: FieldLeaf) -> list[str]:
        return [
            w.lower()
            for part in leaf.path
            if isinstance(part, str)
            for w in readable_field(part).split()
        ]

    def currency(self) -> str | None:
        for leaf in self.leaves:
            if self.words(leaf)[-1:] == ["currency"] and isinstance(leaf.value, str):
                return leaf.value.strip().upper() or None
        return None

    def amounts(self) -> list[tuple[FieldLeaf, Decimal, str | None]]:
        """Every numeric value (numbers, and strings that are entirely an amount)."""
        out = []
        default = self.currency()
        for leaf in self.leaves:
            value = leaf.value
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, int | float):
                out.append((leaf, Decimal(str(value)), default))
            elif isinstance(value, str) and (parsed := parse_amount(value)) is not None:
                out.append((leaf, parsed[0], parsed[1] or default))
        return out

    def carries(self, quantity: bool) -> bool:
        """Does the record carry money (or quantities) at all, so that a missing amount
        means something? An order with a price list does not say how many were bought."""
        for leaf, _, currency in self.amounts():
            words = set(self.words(leaf))
            if quantity and words & _QUANTITY_FIELD_WORDS:
                return True
            if not quantity and (currency is not None or words & _MONEY_FIELD_WORDS):
                return True
        return False

    def numbers(self) -> frozenset[str]:
        """Every number written anywhere in the record, as the rules judge reads them."""
        texts = [self.item.text] + [str(leaf.value) for leaf in self.leaves]
        return frozenset().union(*(numbers(t) for t in texts))


def _records(evidence: Sequence[EvidenceItem]) -> list[_Record]:
    return [
        _Record(item, tuple(record_leaves(item)))
        for item in evidence
        if item.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT)
    ]


# --------------------------------------------------------------------------- identifiers

_ID_KINDS: Final[Mapping[str, str]] = {
    "purchase order": "po", "po": "po", "order": "order", "invoice": "invoice",
    "ticket": "ticket", "case": "case", "reference": "reference", "ref": "reference",
    "tracking": "tracking", "account": "account", "customer": "customer",
    "booking": "booking", "reservation": "reservation", "transaction": "transaction",
    "shipment": "shipment", "rma": "rma", "claim": "claim", "contract": "contract",
    "subscription": "subscription",
}  # fmt: skip
_ID_PREFIXES: Final[Mapping[str, str]] = {
    "INV": "invoice", "PO": "po", "ORD": "order", "TKT": "ticket", "RMA": "rma",
    "CASE": "case", "REF": "reference",
}  # fmt: skip
_KIND_WORDS = "|".join(sorted(_ID_KINDS, key=len, reverse=True)).replace(" ", r"\s+")
_CLAIM_ID = re.compile(
    rf"\b(?P<kind>{_KIND_WORDS})\s*(?:(?:number|no\.?|num|nr|#|id|code)\s*)?"
    r"(?:(?:is|was)\s+)?(?:[:#]\s*)?"  # not "[:#]?\s*": two adjacent \s* are quadratic
    r"(?P<id>(?=[\w-]*\d)[A-Z0-9][\w-]*[A-Z0-9]|\d{3,})\b"
    rf"|\b(?P<prefixed>(?:{'|'.join(_ID_PREFIXES)})[-_]?\d[\w-]*)\b",
    re.IGNORECASE,
)
_ID_FIELD_ENDS: Final = word_set("id number no num nr ref reference code")


@dataclass(frozen=True, slots=True)
class _Identifier:
    kind: str
    written: str


def _claim_ids(claim: str) -> list[_Identifier]:
    found = []
    for match in _CLAIM_ID.finditer(claim):
        if match["prefixed"]:
            prefix = re.match(r"[A-Za-z]+", match["prefixed"])
            kind = _ID_PREFIXES.get(prefix[0].upper(), "") if prefix else ""
            if kind:
                found.append(_Identifier(kind, match["prefixed"]))
        elif len(match["id"]) >= 3 and not match["id"].isalpha():
            kind = _ID_KINDS[re.sub(r"\s+", " ", match["kind"].lower())]
            found.append(_Identifier(kind, match["id"]))
    return found


def _id_kind_of_field(words: Sequence[str]) -> str | None:
    """``order_id`` -> order, ``purchase_order_number`` -> po, ``invoice`` -> invoice."""
    if not words:
        return None
    if "purchase" in words and "order" in words:
        kind = "po"
    else:
        singular = [w[:-1] if w not in _ID_KINDS and w.endswith("s") else w for w in words]
        kinds = [_ID_KINDS[w] for w in singular if w in _ID_KINDS]
        if not kinds:
            return None
        kind = kinds[-1]
    last = words[-1]
    return kind if last in _ID_FIELD_ENDS or _ID_KINDS.get(last) == kind else None


def _norm_id(value: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", value.upper())


def _same_id(a: str, b: str) -> bool:
    """Equal up to case, separators, a kind prefix ("PO-4500" = "4500") or leading zeros."""
    x, y = _norm_id(a), _norm_id(b)
    if x == y:
        return True
    bare_x, bare_y = re.sub(r"^[A-Z]+", "", x), re.sub(r"^[A-Z]+", "", y)
    return bool(bare_x) and bare_x.lstrip("0") == bare_y.lstrip("0")


# -------------------------------------------------------------------------------- states

# claim word -> its family; a record value maps to a family by the same words
_STATE_WORDS: Final[Mapping[str, str]] = {
    "pending": "pending", "queued": "pending", "awaiting": "pending", "on hold": "pending",
    "under review": "pending", "in review": "pending", "waiting": "pending",
    "processing": "processing", "in progress": "processing", "being processed": "processing",
    "shipped": "shipped", "dispatched": "shipped", "in transit": "shipped",
    "delivered": "delivered", "refunded": "refunded", "issued": "issued",
    "cancelled": "cancelled", "canceled": "cancelled", "voided": "cancelled",
    "approved": "approved", "accepted": "approved", "authorized": "approved",
    "authorised": "approved", "rejected": "rejected", "denied": "rejected",
    "declined": "rejected", "refused": "rejected", "paid": "paid", "settled": "paid",
    "unpaid": "unpaid", "overdue": "unpaid", "outstanding": "unpaid",
    "completed": "completed", "complete": "completed", "fulfilled": "completed",
    "closed": "closed", "resolved": "closed", "open": "open", "reopened": "open",
    "failed": "failed", "escalated": "escalated", "returned": "returned",
    "blocked": "blocked", "suspended": "blocked",
}  # fmt: skip
# claim family -> record families under which the claim is true
_SATISFIED_BY: Final[Mapping[str, frozenset[str]]] = {
    "shipped": frozenset({"shipped", "delivered"}),
    "issued": frozenset({"issued", "refunded", "paid", "completed"}),
    "approved": frozenset({"approved", "issued", "paid", "refunded", "completed"}),
    "paid": frozenset({"paid", "completed", "refunded"}),
    "completed": frozenset({"completed", "closed", "delivered", "refunded", "paid", "issued"}),
    "closed": frozenset({"closed", "completed"}),
    "pending": frozenset({"pending", "processing"}),
    "processing": frozenset({"processing", "pending"}),
    "open": frozenset({"open", "pending", "processing", "escalated"}),
    "escalated": frozenset({"escalated", "pending"}),
    "failed": frozenset({"failed", "rejected"}),
}
_STATE_ALTERNATION = "|".join(sorted(_STATE_WORDS, key=len, reverse=True)).replace(" ", r"\s+")
# The state reported as a fact: "has been shipped", "is pending", "status is approved".
_REPORTED_STATE = re.compile(
    r"\b(?:is|are|was|were|been|has|have|had|got|now|already|being|status\s+is|status:)"
    rf"\s+(?:(?:now|already|successfully|fully|just|been)\s+)?(?P<state>{_STATE_ALTERNATION})\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|never|no|yet to be)\b|n't\b", re.IGNORECASE)
_MODAL = re.compile(r"\b(?:will|would|can|could|should|may|might|must|shall)\b", re.IGNORECASE)
_CONDITIONAL = re.compile(
    r"\b(?:if|once|when|whenever|after|before|until|unless|within)\b", re.IGNORECASE
)
_STATE_FIELD_ENDS: Final = frozenset({"status", "state", "stage"})


def _family(value: str) -> str | None:
    text = re.sub(r"[_\-]+", " ", value.strip().lower())
    if re.search(r"\b(?:not|no|never)\b", text):
        return None  # "not_shipped" is no state of the "shipped" family
    if text in _STATE_WORDS:
        return _STATE_WORDS[text]
    families = {f for w, f in _STATE_WORDS.items() if re.search(rf"\b{w}\b", text)}
    return families.pop() if len(families) == 1 else None  # "queued for review" -> pending


def _claim_states(claim: str) -> list[tuple[str, str]]:
    """(word as written, family) for each state the claim reports as a present fact."""
    found = []
    for match in _REPORTED_STATE.finditer(claim):
        before = claim[max(0, match.start() - 30) : match.start("state")]
        if _NEGATION.search(before) or _MODAL.search(before):
            continue
        written = re.sub(r"\s+", " ", match["state"].lower())
        found.append((match["state"], _STATE_WORDS[written]))
    return found


# -------------------------------------------------------------------------- about the case

_CASE_MARKER = re.compile(
    r"\b(?:your|you|you'r?e|you've|i|i've|i'm|we|we've|we're|my|our)\b", re.IGNORECASE
)


def _about_this_case(claim: str, ids: Sequence[_Identifier]) -> bool:
    """A report about this customer's case, not a rule: it names the case (an id) or
    addresses the customer, and does not state a condition ("once it ships...")."""
    if _CONDITIONAL.search(claim):
        return False
    return bool(ids) or bool(_CASE_MARKER.search(claim.replace("\u2019", "'")))


# ----------------------------------------------------------------------------- refused calls

_ACTIONS: Final[Mapping[str, str]] = {
    "refund": "refund", "refunded": "refund", "reimbursed": "refund",
    "cancel": "cancel", "cancelled": "cancel", "canceled": "cancel", "cancellation": "cancel",
    "ship": "ship", "shipped": "ship", "reshipped": "ship", "dispatched": "ship",
    "approve": "approve", "approved": "approve", "approval": "approve",
    "issue": "issue", "issued": "issue", "reset": "reset", "update": "update",
    "updated": "update", "change": "change", "changed": "change", "book": "book",
    "booked": "book", "transfer": "transfer", "transferred": "transfer", "pay": "pay",
    "paid": "pay", "payment": "pay", "payout": "pay", "escalate": "escalate",
    "escalated": "escalate", "send": "send", "sent": "send", "credit": "credit",
    "credited": "credit", "replace": "replace", "replaced": "replace",
    "replacement": "replace", "return": "return", "returned": "return", "close": "close",
    "closed": "close", "reopen": "reopen", "reopened": "reopen", "unblock": "unblock",
    "unblocked": "unblock", "release": "release", "released": "release",
    "delete": "delete", "deleted": "delete", "create": "create", "created": "create",
    "schedule": "schedule", "scheduled": "schedule", "upgrade": "upgrade",
    "upgraded": "upgrade", "process": "process", "processed": "process",
    "waive": "waive", "waived": "waive", "apply": "apply", "applied": "apply",
    "completed": "complete", "made": "make", "initiated": "initiate",
    "executed": "execute", "finalized": "finalize", "finalised": "finalize",
}  # fmt: skip
# Verbs that say something was done to a noun: "your refund has been issued/sent".
_GENERIC_ACTIONS: Final = frozenset(
    {"issue", "process", "complete", "make", "initiate", "execute", "apply", "finalize", "send"}
)
_LOOKUP = re.compile(
    r"\b(?:get|lookup|look up|fetch|read|list|search|query|find|retrieve|check|show|view"
    r"|status)\b",
    re.IGNORECASE,
)
_CALL_NAME_FIELDS: Final = word_set(
    "tool tool_name name action function operation call method endpoint intent"
)
_DONE_VERBS = "|".join(w for w in _ACTIONS if w.endswith(("ed", "sent", "paid", "reset", "made")))
# "I have refunded", "I've cancelled", "has been issued", "was processed", "I refunded"
_REPORTED_ACTION = re.compile(
    r"\b(?:i|we|i've|we've|has|have|had|was|were|been|is|are|successfully|just|now|already)"
    rf"\s+(?:(?:been|now|already|successfully|just|fully)\s+)*(?P<verb>{_DONE_VERBS})\b",
    re.IGNORECASE,
)
_NOT_DONE = re.compile(
    r"\b(?:not|never|unable|cannot|requested|request|tried|attempted|submitted|pending"
    r"|review|will|would|can|could|should|may|might|must|if|once|when)\b|n't\b",
    re.IGNORECASE,
)
_ACKNOWLEDGES_REFUSAL = re.compile(
    r"\b(?:refused|denied|declined|rejected|not executed|blocked)\b", re.IGNORECASE
)


def _action_words(text: str) -> set[str]:
    words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())
    return {_ACTIONS[w] for w in words if w in _ACTIONS}


def _reported_actions(claim: str) -> set[str]:
    """Actions the claim says were done - not requested, refused or negated. After a
    generic verb ("has been processed", "was issued") the action is the noun it is
    about ("your refund"), so the nouns of the claim count too."""
    text = claim.replace("\u2019", "'")
    if _ACKNOWLEDGES_REFUSAL.search(text):
        return set()  # "the refund was requested but refused": matches the evidence
    done = set()
    for match in _REPORTED_ACTION.finditer(text):
        if _NOT_DONE.search(text[max(0, match.start() - 40) : match.start("verb")]):
            continue
        done.add(_ACTIONS[match["verb"].lower()])
    if done & _GENERIC_ACTIONS:
        done |= _action_words(text)
    return done


def _call_actions(record: _Record) -> set[str]:
    """What a tool call does, from its name: the item's id and source and fields such as
    ``tool``; only when those name no action, from all its keys and text."""
    named = [record.item.id, record.item.source or ""]
    named += [
        str(leaf.value)
        for leaf in record.leaves
        if leaf.path and str(leaf.path[-1]).lower() in _CALL_NAME_FIELDS
    ]
    name = " ".join(named)
    if _LOOKUP.search(re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ")):
        return set()  # "get_refund" reads a refund, it does not make one
    actions = _action_words(name)
    if actions:
        return actions
    rest = [record.item.text] + [str(p) for leaf in record.leaves for p in leaf.path]
    return _action_words(" ".join(rest))


def _reports_call(done: set[str], call: set[str]) -> bool:
    """ "I have refunded" reports ``issue_refund``; "I sent you an email" does not report
    ``send_refund``: every specific action of the call must be reported."""
    specific = call - _GENERIC_ACTIONS
    return specific <= done if specific else bool(call & done)


def _not_executed(claim: str, records: Sequence[_Record]) -> RecordFinding | None:
    done = _reported_actions(claim)
    if not done:
        return None
    executed = [_call_actions(r) for r in records if r.executed]
    for record in records:
        if record.executed:
            continue
        call = _call_actions(record)
        if not call or not _reports_call(done, call):
            continue
        if any(_reports_call(done, other) for other in executed if other & call):
            continue  # a refused call retried successfully: leave it to NLI
        action = ", ".join(sorted(call & done))
        return RecordFinding(
            RecordReason.NOT_EXECUTED,
            VerdictLabel.CONTRADICTED,
            f"the claim reports '{action}' done, but call {record.item.id} was refused",
            evidence_id=record.item.id,
            claim_value=action,
            record_value="not executed",
        )
    return None


# --------------------------------------------------------------------------------- checks


def _check_ids(
    ids: Sequence[_Identifier], records: Sequence[_Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    """(mismatch, confirmation) for the claim's identifiers."""
    confirmation = None
    for ident in ids:
        known = [
            (r, leaf)
            for r in records
            for leaf in r.leaves
            if isinstance(leaf.value, str | int)
            and not isinstance(leaf.value, bool)
            and re.search(r"\d", str(leaf.value))
            and _id_kind_of_field(r.words(leaf)) == ident.kind
        ]
        if not known:
            continue
        match = next(((r, lf) for r, lf in known if _same_id(ident.written, str(lf.value))), None)
        if match is not None:
            confirmation = confirmation or _confirm(match[0], match[1], ident.written)
            continue
        if any(_norm_id(ident.written) in _norm_id(r.item.text) for r in records):
            continue  # named somewhere in the records (a related order): no alarm
        record, leaf = known[0]
        return (
            RecordFinding(
                RecordReason.IDENTIFIER_MISMATCH,
                VerdictLabel.CONTRADICTED,
                f"claim names {ident.kind} {ident.written}, record {record.item.id} "
                f"{leaf.name} is {leaf.value}",
                evidence_id=record.item.id,
                field=leaf.name,
                claim_value=ident.written,
                record_value=str(leaf.value),
            ),
            None,
        )
    return None, confirmation


def _nearest_amount(
    claim: str, carrying: Sequence[_Record], quantity: bool
) -> tuple[_Record, FieldLeaf, Decimal, str | None]:
    """The amount field the claim most likely means, to show beside the claim's value:
    one about the claim's subject ("refund.amount" for a refund), an amount-named one."""
    entity = _claim_entity(claim)
    candidates = [(r, *a) for r in carrying for a in r.amounts()]

    wanted = _QUANTITY_FIELD_WORDS if quantity else _MONEY_FIELD_WORDS

    def rank(c: tuple[_Record, FieldLeaf, Decimal, str | None]) -> tuple[bool, bool]:
        words = set(c[0].words(c[1]))
        return (bool(words & wanted), entity in _field_entities(c[0], c[1]))

    return max(candidates, key=rank)


def _amount_mismatch(
    amount: _Amount, record: _Record, leaf: FieldLeaf, shown: str
) -> RecordFinding:
    return RecordFinding(
        RecordReason.AMOUNT_MISMATCH,
        VerdictLabel.CONTRADICTED,
        f"claim says {amount.written}, no field of the records carries it "
        f"(record {record.item.id} {leaf.name} is {shown})",
        evidence_id=record.item.id,
        field=leaf.name,
        claim_value=amount.written,
        record_value=str(leaf.value),
    )


def _check_amounts(
    claim: str, amounts: Sequence[_Amount], records: Sequence[_Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    confirmation = None
    for amount in amounts:
        carrying = [r for r in records if r.carries(amount.quantity)]
        if not carrying:
            continue
        same_value = [
            (r, leaf, currency)
            for r in records
            for leaf, value, currency in r.amounts()
            if value == amount.value
        ]
        match = next(
            (
                (r, leaf)
                for r, leaf, currency in same_value
                if amount.currency is None or currency is None or currency == amount.currency
            ),
            None,
        )
        if match is not None:
            confirmation = confirmation or _confirm(match[0], match[1], amount.written)
            continue
        if same_value:  # the figure is there, in another currency: "€120" vs "120.00 USD"
            record, leaf, currency = same_value[0]
            return _amount_mismatch(amount, record, leaf, f"{amount.value} {currency}"), None
        if any(
            (p := parse_amount(n)) is not None and p[0] == amount.value
            for r in records
            for n in r.numbers()
        ):
            continue  # the number is written somewhere in the records
        record, leaf, value, currency = _nearest_amount(claim, carrying, amount.quantity)
        written = f"{value} {currency}" if currency else str(value)
        return _amount_mismatch(amount, record, leaf, written), None
    return None, confirmation


# What a state is about: "your package" asks about the order, not about the refund.
_ENTITIES: Final[Mapping[str, str]] = {
    "order": "order", "package": "order", "parcel": "order", "shipment": "order",
    "delivery": "order", "purchase": "order", "item": "order", "items": "order",
    "refund": "refund", "reimbursement": "refund",
    "payment": "payment", "charge": "payment", "transaction": "payment",
    "invoice": "invoice", "bill": "invoice",
    "ticket": "ticket", "case": "ticket", "request": "ticket", "complaint": "ticket",
    "claim": "ticket", "return": "return", "rma": "return", "exchange": "return",
    "replacement": "return", "account": "account", "subscription": "account",
    "membership": "account", "booking": "booking", "reservation": "booking",
}  # fmt: skip


def _entities(words: Iterable[str]) -> set[str]:
    return {_ENTITIES[w] for w in words if w in _ENTITIES}


def _claim_entity(claim: str) -> str | None:
    """The first thing the claim talks about ("Your refund for order 12 ..." -> refund)."""
    for word in re.findall(r"[a-z]+", claim.lower()):
        if word in _ENTITIES:
            return _ENTITIES[word]
    return None


def _field_entities(record: _Record, leaf: FieldLeaf) -> set[str]:
    """What a state field is about: its own path ("refund_status"), else its record
    (the item's id and source, the kinds of its id fields: ``order_id`` -> order)."""
    own = _entities(record.words(leaf))
    if own:
        return own
    context = re.findall(r"[a-z]+", f"{record.item.id} {record.item.source or ''}".lower())
    for other in record.leaves:
        context += record.words(other)[:-1]
    if record.item.kind is EvidenceKind.RECORD or not record.leaves:
        context += re.findall(r"[a-z]+", record.item.text.lower())[:50]
    return _entities(context)


def _state_fields(claim: str, records: Sequence[_Record]) -> list[tuple[_Record, FieldLeaf, str]]:
    """The state fields about what the claim is about, whose value is a state we know
    ("state": "CA" is an address). A claim naming nothing we know is matched only
    against a record with a single state field."""
    entity = _claim_entity(claim)
    out = []
    for record in records:
        for leaf in record.leaves:
            words = record.words(leaf)
            if words and words[-1] in _STATE_FIELD_ENDS and isinstance(leaf.value, str):
                family = _family(leaf.value)
                if family is not None:
                    out.append((record, leaf, family))
    if entity is None:
        return out if len(out) == 1 else []
    return [f for f in out if entity in _field_entities(f[0], f[1])]


def _refusal_reported(claim: str, records: Sequence[_Record]) -> _Record | None:
    """ "Your refund was refused": true when a refused call is about that action."""
    words = _action_words(claim) | ({e} if (e := _claim_entity(claim)) else set())
    return next((r for r in records if not r.executed and _call_actions(r) & words), None)


def _check_states(
    claim: str, records: Sequence[_Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    fields = _state_fields(claim, [r for r in records if r.executed])
    done = _reported_actions(claim)
    if done and any(_reports_call(done, _call_actions(r)) for r in records if r.executed):
        fields = []  # a call that did it is on record; a lagging status is not proof
    confirmation = None
    for written, family in _claim_states(claim):
        if family == "rejected" and (refusal := _refusal_reported(claim, records)):
            confirmation = confirmation or RecordFinding(
                RecordReason.RECORD_CONFIRMED,
                None,
                f"call {refusal.item.id} was refused, as the claim says",
                evidence_id=refusal.item.id,
                claim_value=written,
                record_value="not executed",
            )
            continue
        if not fields:
            continue
        allowed = _SATISFIED_BY.get(family, frozenset({family}))
        match = next(((r, lf) for r, lf, f in fields if f in allowed), None)
        if match is not None:
            confirmation = confirmation or _confirm(match[0], match[1], written)
            continue
        record, leaf, _ = fields[0]
        return (
            RecordFinding(
                RecordReason.RECORD_STATE_MISMATCH,
                VerdictLabel.CONTRADICTED,
                f"claim says {written}, record {record.item.id} {leaf.name} is {leaf.value}",
                evidence_id=record.item.id,
                field=leaf.name,
                claim_value=written,
                record_value=str(leaf.value),
            ),
            None,
        )
    return None, confirmation


def _confirm(record: _Record, leaf: FieldLeaf, written: str) -> RecordFinding:
    return RecordFinding(
        RecordReason.RECORD_CONFIRMED,
        None,
        f"record {record.item.id} {leaf.name} confirms {written}",
        evidence_id=record.item.id,
        field=leaf.name,
        claim_value=written,
        record_value=str(leaf.value),
    )


def check_record(claim: str, evidence: Sequence[EvidenceItem]) -> RecordFinding | None:
    """The record check of one claim against the answer's evidence, or None.

    In order: a reported action whose call was refused (NOT_EXECUTED); a case claim
    with no record or tool result at all (CLAIM_WITHOUT_TOOL_EVIDENCE); an identifier,
    amount or state that the records contradict; else a value the records confirm.
    """
    records = _records(evidence)
    refused = _not_executed(claim, records)
    if refused is not None:
        return refused
    ids = _claim_ids(claim)
    if not _about_this_case(claim, ids):
        return None
    amounts = _claim_amounts(claim)
    states = _claim_states(claim)
    if not records:
        if not (ids or amounts or states):
            return None
        shown = ", ".join(
            [i.written for i in ids] + [a.written for a in amounts] + [s[0] for s in states]
        )
        return RecordFinding(
            RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
            VerdictLabel.UNSUPPORTED,
            f"a claim about this case ({shown}) with no record or tool result behind it",
            claim_value=shown,
        )
    confirmations = []
    for mismatch, confirmation in (
        _check_ids(ids, records),
        _check_amounts(claim, amounts, records),
        _check_states(claim, records),
    ):
        if mismatch is not None:
            return mismatch
        if confirmation is not None:
            confirmations.append(confirmation)
    return confirmations[0] if confirmations else None


def confirmed_by_records(evidence: Sequence[EvidenceItem]) -> Callable[[str], bool]:
    """A predicate for token confidence: does a record carry this specific value?

    Compared as an amount ("€1,200.00" == 1200, currencies must agree when both are
    known) or as an identifier ("PO-4500017311" == "4500017311"). Refused calls do not
    confirm: their arguments were asked for, not done.
    """
    records = [r for r in _records(evidence) if r.executed]
    amounts = [(value, currency) for r in records for _, value, currency in r.amounts()]
    written = [str(leaf.value) for r in records for leaf in r.leaves if leaf.value is not None]
    written += [n for r in records for n in r.numbers()]

    def confirmed(value: str) -> bool:
        parsed = parse_amount(value)
        if parsed is not None and any(
            v == parsed[0] and (parsed[1] is None or c is None or c == parsed[1])
            for v, c in amounts
        ):
            return True
        return bool(_norm_id(value)) and any(_same_id(value, w) for w in written)

    return confirmed


def confirmed_values(claim: str, evidence: Sequence[EvidenceItem]) -> frozenset[str]:
    """The ids, amounts, dates and numbers of ``claim``, as written, that a record carries:
    the set token confidence accepts when one of them was written with a low probability."""
    confirmed = confirmed_by_records(evidence)
    values = (claim[s:e].rstrip(".,") for s, e in specific_spans(claim))
    return frozenset(v for v in values if confirmed(v))
