"""The labels loop's join of reviewers' labels with review items, one partition's worth.

Pure state over a key/value store (the loop's :class:`~streamproc.kafka.store.
TrackedStore`, changelogged like the window state), so every rule is tested without a
broker. Answer ids are each tenant's own, so both keys hold the tenant:

- ``item:["<tenant>","<answer_id>"]`` (:func:`item_key`): what the accuracy figures need
  of a review item (tenant, answer id, assistant, task type, judge key, the judge's
  answer and claim verdicts, inclusion probability, when the answer was given and when
  the item arrived), the labels accepted so far (one per reviewer) and every label id
  seen for it (duplicates are dropped);
- ``wait:["<tenant>","<answer_id>","<label_id>"]`` (:func:`wait_key`): a label whose
  review item has not arrived (a label may come before its item when the queue topic
  lags), with its original bytes and position, so that after ``wait_s`` it goes to the
  dead-letter topic whole.

Entries of the earlier layout (keyed by answer id alone) are moved to these keys when
the state is restored.

Rules: a label joins the item of its own ``tenant`` and answer id - another tenant's item
of the same answer id is never touched, the label waits for its own and otherwise expires
as an unknown answer. It is refused at once unless ``may_label(reviewer, tenant)`` says
yes (no ``may_label``: no reviewer is allowed - the tokens file names who may label
what). A reviewer labels an answer once: a later label
of the same reviewer replaces the earlier one (a correction), and its delta moves the
answer's contribution from the old label to the new one. An answer counts once however
many reviewers label it (``answer_contribution`` splits it over its labels), and each
label's :class:`~streamproc.contracts.label_events.LabelDelta` is the contribution after minus
before it; an answer's second reviewer makes its pair for Cohen's kappa (a later
correction of either does not revise the pair). A repeated review item changes nothing
(the first one is kept); items are forgotten ``retain_s`` after they arrived.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, TypeAlias

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.label_events import (
    UNKNOWN_TASK_TYPE,
    AccuracyCell,
    AnswerLabel,
    ClaimLabelValue,
    LabelAuditEntry,
    LabelDelta,
    LabelEvent,
    ReviewItem,
    Tally,
)
from streamproc.kafka.store import encode_entry
from streamproc.rates.live_accuracy import answer_contribution, contribution_delta
from streamproc.review.labels.inputs import parse_input
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection
from streamproc.verdicts.fit import fits

__all__ = [
    "ITEM_PREFIX",
    "UNKNOWN_JUDGE_KEY",
    "WAIT_PREFIX",
    "Accepted",
    "Duplicate",
    "EntryTooLarge",
    "Handled",
    "LabelJoin",
    "MayLabel",
    "Rejected",
    "Waiting",
    "claim_agreement",
    "item_key",
    "wait_key",
]

ITEM_PREFIX = "item:"
WAIT_PREFIX = "wait:"
UNKNOWN_JUDGE_KEY = "unknown"
"""The judge key of a cell whose review items named none."""

_AnswerRef: TypeAlias = tuple[str, str]
"""(tenant, answer id)."""

MayLabel: TypeAlias = Callable[[str, str], bool]
"""``(reviewer, tenant)``: whether the reviewer may label that tenant's answers."""

_COMPARED = (ClaimLabelValue.SUPPORTED, ClaimLabelValue.CONTRADICTED, ClaimLabelValue.UNSUPPORTED)


@dataclass(frozen=True, slots=True)
class Accepted:
    """A label joined with its item: its audit entry and its cell's delta to publish."""

    label: LabelEvent
    audit: LabelAuditEntry
    delta: LabelDelta


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A label id seen before for this answer: acknowledged, nothing else."""

    label_id: str


@dataclass(frozen=True, slots=True)
class Waiting:
    """A label kept until its review item comes (or ``wait_s`` passes)."""

    label_id: str


@dataclass(frozen=True, slots=True)
class Rejected:
    """A label (or item) for the dead-letter topic, with its original bytes and position.
    ``outcome`` is what the sensor is told: invalid, refused or unknown_answer."""

    rejection: Rejection
    origin: MessageOrigin
    value: bytes | None
    outcome: str


Handled: TypeAlias = Accepted | Duplicate | Waiting | Rejected


class EntryTooLarge(ValueError):
    """A state entry over the changelog topic's limit."""


class LabelJoin:
    """One partition's items and labels; see the module docstring.

    ``max_entry_bytes``: the changelog topic's limit. A change whose entry would not fit
    is refused (the label or item goes to the dead-letter topic) instead of aborting the
    transaction it would travel in.
    """

    def __init__(
        self,
        store: MutableMapping[str, Any],
        *,
        wait_s: float,
        retain_s: float,
        may_label: MayLabel | None,
        max_entry_bytes: int,
    ) -> None:
        self._store = store
        self._wait_s = wait_s
        self._retain_s = retain_s
        self._may_label = may_label
        self._max_entry_bytes = max_entry_bytes
        self._waiting: dict[_AnswerRef, set[str]] = {}
        """(tenant, answer id) -> ids of the labels waiting for it (rebuilt from the store)."""
        _upgrade_legacy(store)
        for key, entry in store.items():
            if key.startswith(WAIT_PREFIX):
                ref = (entry["tenant"], entry["answer_id"])
                self._waiting.setdefault(ref, set()).add(entry["label_id"])

    # ----------------------------------------------------------------- inputs

    def item(self, item: ReviewItem, now: float) -> list[Handled]:
        """Keep a review item (the first one of an answer: a repeat changes nothing) and
        handle the labels that were waiting for it. :class:`EntryTooLarge` when even its
        summary cannot be stored (nothing changed)."""
        key = item_key(item.tenant, item.answer_id)
        if key in self._store:
            return []
        if not self._put(key, _summary(item, now)):
            raise EntryTooLarge(f"review item of answer {item.answer_id!r}: summary too large")
        released: list[Handled] = []
        for label_id in sorted(self._waiting.pop((item.tenant, item.answer_id), set())):
            entry = self._store.pop(wait_key(item.tenant, item.answer_id, label_id))
            released.append(self.label(base64.b64decode(entry["value_b64"]), _origin(entry), now))
        return released

    def label(self, value: bytes | None, origin: MessageOrigin, now: float) -> Handled:
        """Parse and join one label as received (``value``: its bytes)."""
        parsed = parse_input(LabelEvent, value, "label")
        if isinstance(parsed, Rejection):
            return Rejected(parsed, origin, value, "invalid")
        label, raw = parsed, value or b""
        entry = self._store.get(item_key(label.tenant, label.answer_id))
        if entry is not None and label.label_id in entry["label_ids"]:
            return Duplicate(label.label_id)
        tenant = label.tenant
        if self._may_label is None:
            return _refused(label, origin, raw, "no reviewer tokens are configured")
        if not self._may_label(label.reviewer, tenant):
            return _refused(
                label, origin, raw, f"reviewer {label.reviewer!r} may not see tenant {tenant!r}"
            )
        if entry is None:
            return self._wait(label, raw, origin, now)
        return self._accept(entry, label, raw, origin, now)

    # ----------------------------------------------------------------- time

    def expire(self, now: float) -> list[Rejected]:
        """Waiting labels past ``wait_s``: dead letters (unknown answer), whole."""
        expired: list[Rejected] = []
        for (tenant, answer_id), label_ids in list(self._waiting.items()):
            for label_id in sorted(label_ids):
                key = wait_key(tenant, answer_id, label_id)
                entry = self._store[key]
                if now - entry["received_at"] < self._wait_s:
                    continue
                del self._store[key]
                label_ids.discard(label_id)
                expired.append(
                    Rejected(
                        Rejection(
                            DeadLetterReason.UNKNOWN_ANSWER,
                            f"no review item for answer {answer_id!r} of tenant {tenant!r} within "
                            f"{self._wait_s:g} s of label {label_id!r}",
                        ),
                        _origin(entry),
                        base64.b64decode(entry["value_b64"]),
                        "unknown_answer",
                    )
                )
            if not label_ids:
                del self._waiting[(tenant, answer_id)]
        return expired

    def sweep(self, now: float) -> int:
        """Forget review items that arrived more than ``retain_s`` ago (their tombstones go
        out with the next flush); how many. A label for one later waits, then is dead-
        lettered as for an unknown answer."""
        old = [
            key
            for key, entry in self._store.items()
            if key.startswith(ITEM_PREFIX) and now - entry["received_at"] > self._retain_s
        ]
        for key in old:
            del self._store[key]
        return len(old)

    def waiting(self) -> int:
        return sum(len(ids) for ids in self._waiting.values())

    # ----------------------------------------------------------------- inside

    def _wait(self, label: LabelEvent, raw: bytes, origin: MessageOrigin, now: float) -> Handled:
        key = wait_key(label.tenant, label.answer_id, label.label_id)
        if key in self._store:
            return Duplicate(label.label_id)
        entry = {
            "tenant": label.tenant,
            "answer_id": label.answer_id,
            "label_id": label.label_id,
            "received_at": now,
            "value_b64": base64.b64encode(raw).decode("ascii"),
            "topic": origin.topic,
            "partition": origin.partition,
            "offset": origin.offset,
            "key_b64": None if origin.key is None else base64.b64encode(origin.key).decode(),
        }
        if not self._put(key, entry):
            return Rejected(
                Rejection(
                    DeadLetterReason.UNKNOWN_ANSWER,
                    f"no review item for answer {label.answer_id!r}, and the label is too "
                    "large to wait for it",
                ),
                origin,
                raw,
                "unknown_answer",
            )
        self._waiting.setdefault((label.tenant, label.answer_id), set()).add(label.label_id)
        return Waiting(label.label_id)

    def _accept(
        self,
        entry: Mapping[str, Any],
        label: LabelEvent,
        raw: bytes,
        origin: MessageOrigin,
        now: float,
    ) -> Handled:
        labels: list[dict[str, Any]] = list(entry["labels"])
        claims = {str(c.index): c.label.value for c in label.claims}
        mine = {
            "label_id": label.label_id,
            "reviewer": label.reviewer,
            "answer_label": label.answer_label,
            "claims": claims,
        }
        earlier = next(
            (i for i, old in enumerate(labels) if old["reviewer"] == label.reviewer), None
        )
        replaced = None if earlier is None else labels[earlier]
        after = [*labels]
        if earlier is None:
            after.append(mine)
        else:
            after[earlier] = mine  # the reviewer's correction keeps their place
        updated = {**entry, "labels": after, "label_ids": [*entry["label_ids"], label.label_id]}
        if not self._put(item_key(label.tenant, label.answer_id), updated):
            return Rejected(
                Rejection(
                    DeadLetterReason.PROCESSING_ERROR,
                    f"answer {label.answer_id!r} holds too many labels to keep another",
                ),
                origin,
                raw,
                "invalid",
            )
        hallucinated: bool = entry["hallucinated"]
        weight = 1.0 / float(entry["p"])
        before = answer_contribution(hallucinated, _answer_labels(labels), weight)
        now_counts = answer_contribution(hallucinated, _answer_labels(after), weight)
        change = contribution_delta(before, now_counts)
        judge_claims: dict[str, str | None] = entry["claims"]
        compared, agreeing = claim_agreement(judge_claims, claims)
        if replaced is not None:
            old_compared, old_agreeing = claim_agreement(judge_claims, replaced["claims"])
            compared, agreeing = compared - old_compared, agreeing - old_agreeing
        pair: tuple[AnswerLabel, AnswerLabel] | None = None
        if earlier is None and len(after) == 2:
            first, second = after[0]["answer_label"], label.answer_label
            if first is not None and second is not None:
                pair = (first, second)
        cell = _cell(entry)
        delta = LabelDelta(
            cell=cell,
            answer_id=label.answer_id,
            label_id=label.label_id,
            answer_day=_day(entry["occurred_at"]),
            labelled_at=label.labelled_at,
            new_answer=not labels,
            tp=change.get("tp", Tally()),
            fp=change.get("fp", Tally()),
            fn=change.get("fn", Tally()),
            tn=change.get("tn", Tally()),
            claims_compared=compared,
            claims_agreeing=agreeing,
            reviewer_pair=pair,
        )
        audit = LabelAuditEntry(
            answer_id=label.answer_id,
            tenant=cell.tenant,
            assistant_id=cell.assistant_id,
            label=label,
            label_sha256=hashlib.sha256(raw).hexdigest(),
            judge_key=entry["judge_key"],
            judge_hallucinated=hallucinated,
            agrees_with_judge=None
            if label.answer_label is None
            else (label.answer_label == "hallucinated") == hallucinated,
            claims_disagreeing=_disagreeing(judge_claims, claims),
            recorded_at=datetime.fromtimestamp(now, UTC),
        )
        return Accepted(label, audit, delta)

    def _put(self, key: str, entry: Mapping[str, Any]) -> bool:
        if not self._fits(key, entry):
            return False
        self._store[key] = dict(entry)
        return True

    def _fits(self, key: str, entry: Mapping[str, Any]) -> bool:
        encoded_key, encoded_value = encode_entry(key, dict(entry))
        return encoded_value is not None and fits(encoded_key, encoded_value, self._max_entry_bytes)


def item_key(tenant: str, answer_id: str) -> str:
    """The key of a review item: unambiguous whatever the tenant and id hold."""
    return ITEM_PREFIX + json.dumps([tenant, answer_id], separators=(",", ":"))


def wait_key(tenant: str, answer_id: str, label_id: str) -> str:
    """The key of a waiting label: unambiguous whatever the ids hold."""
    return WAIT_PREFIX + json.dumps([tenant, answer_id, label_id], separators=(",", ":"))


def _upgrade_legacy(store: MutableMapping[str, Any]) -> None:
    """Move entries keyed by answer id alone (no ``tenant`` / ``answer_id`` of their own
    in the entry) to their tenant-scoped keys; the moves go out with the next flush. A
    waiting label takes the tenant its own bytes name."""
    for key in [k for k in store if k.startswith((ITEM_PREFIX, WAIT_PREFIX))]:
        entry = store[key]
        if key.startswith(ITEM_PREFIX) and "answer_id" not in entry:
            moved = {**entry, "answer_id": key[len(ITEM_PREFIX) :]}
            del store[key]
            store.setdefault(item_key(moved["tenant"], moved["answer_id"]), moved)
        elif key.startswith(WAIT_PREFIX) and "tenant" not in entry:
            parsed = parse_input(LabelEvent, base64.b64decode(entry["value_b64"]), "label")
            del store[key]
            if not isinstance(parsed, Rejection):
                moved = {**entry, "tenant": parsed.tenant}
                store[wait_key(parsed.tenant, entry["answer_id"], entry["label_id"])] = moved


def claim_agreement(judge: Mapping[str, str | None], labels: Mapping[str, str]) -> tuple[int, int]:
    """(claims compared, claims agreeing) of one reviewer's claim labels with the judge's
    verdicts: only claims the reviewer labelled supported / contradicted / unsupported
    and the judge checked count."""
    compared = agreeing = 0
    for index, value in _compared(judge, labels):
        compared += 1
        agreeing += value == judge[index]
    return compared, agreeing


def _disagreeing(judge: Mapping[str, str | None], labels: Mapping[str, str]) -> list[int]:
    return sorted(int(index) for index, value in _compared(judge, labels) if value != judge[index])


def _compared(
    judge: Mapping[str, str | None], labels: Mapping[str, str]
) -> Iterator[tuple[str, str]]:
    for index, value in labels.items():
        if value in _COMPARED and judge.get(index) is not None:
            yield index, value


def _origin(entry: Mapping[str, Any]) -> MessageOrigin:
    """Where a waiting label was read."""
    key = entry["key_b64"]
    return MessageOrigin(
        entry["topic"],
        entry["partition"],
        entry["offset"],
        None if key is None else base64.b64decode(key),
    )


def _answer_labels(labels: Sequence[Mapping[str, Any]]) -> list[AnswerLabel | None]:
    return [label["answer_label"] for label in labels]


def _summary(item: ReviewItem, now: float) -> dict[str, Any]:
    return {
        "tenant": item.tenant,
        "answer_id": item.answer_id,
        "assistant_id": item.assistant_id,
        "task_type": item.task_type,
        "judge_key": item.judge_key,
        "hallucinated": item.judgement.hallucinated,
        "claims": {
            str(claim.index): None if claim.verdict is None else claim.verdict.value
            for claim in item.judgement.claims
        },
        "p": item.inclusion_probability,
        "occurred_at": item.occurred_at.isoformat(),
        "received_at": now,
        "labels": [],
        "label_ids": [],
    }


def _cell(entry: Mapping[str, Any]) -> AccuracyCell:
    return AccuracyCell(
        tenant=entry["tenant"],
        assistant_id=entry["assistant_id"],
        task_type=entry["task_type"] or UNKNOWN_TASK_TYPE,
        judge_key=entry["judge_key"] or UNKNOWN_JUDGE_KEY,
    )


def _day(occurred_at: str) -> date:
    return datetime.fromisoformat(occurred_at).astimezone(UTC).date()


def _refused(label: LabelEvent, origin: MessageOrigin, raw: bytes, why: str) -> Rejected:
    return Rejected(
        Rejection(
            DeadLetterReason.LABEL_REFUSED,
            f"label {label.label_id!r} of answer {label.answer_id!r} refused: {why}",
        ),
        origin,
        raw,
        "refused",
    )
