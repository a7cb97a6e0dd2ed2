"""What the window loop tells the rest of the worker: one report per partition per
transaction, and the two hooks that receive it.

- ``in_transaction(report) -> records``: called while the transaction is being built;
  the records it returns (made by an
  :class:`~streamproc.verdicts.output_topic.OutputTopic`, as the alert hooks' are) are
  published in the same Kafka transaction as the
  aggregates, the window state and the input offsets (e.g. alert events). It may keep
  its own state in ``report.state``: entries there are changelogged with the window
  state in the same transaction and restored with it when a worker takes the partition
  over, so alert state and window counts can never disagree after a crash.
- ``after_commit(report)``: called once the transaction committed (e.g. metrics gauges
  and counters: they must never count what a failed transaction would redo).

For burn-rate alerting, ``report.deltas`` are the per-pane (one minute by default)
changes in answered and hallucinated answers per (tenant, assistant, model): first the
whole pane when it closes, then ``new - old`` when late answers revise it, so adding
them up in any order gives the current counts. All of one (tenant, assistant)'s series
live in one partition (outcomes are keyed by assistant id), so a per-(tenant, assistant)
alert state in ``report.state`` sees every delta of its key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streamproc.contracts.events import AnswerOutcome, WindowAggregate
from streamproc.verdicts.record import OutboundRecord

__all__ = [
    "EXTENSION_PREFIX",
    "AfterCommit",
    "ExtensionState",
    "InTransaction",
    "PaneDelta",
    "WindowReport",
]

EXTENSION_PREFIX: Final = "x|"
"""Table keys of :class:`ExtensionState` entries; the window table leaves them alone."""


@dataclass(frozen=True, slots=True)
class PaneDelta:
    """The change in one pane's counts since it was last reported (see module docstring)."""

    tenant: str
    assistant_id: str
    model: str
    start: float
    """Pane start, epoch seconds (event time)."""
    end: float
    answered: int
    hallucinated: int
    revision: int
    """0 on the pane's first close, then +1 per revision."""
    example_answer_ids: tuple[str, ...]
    """The pane's hallucinated answer ids kept (the first few), not only the new ones."""


@dataclass(frozen=True, slots=True)
class WindowReport:
    """What one transaction of the window loop did in one partition."""

    partition: int
    now: float
    """Wall clock of the transaction (epoch seconds)."""
    tick: bool
    """True when windows were checked for closing in this transaction (every
    ``window.tick_s``): a hook that acts on time (resolving an alert) can act then even
    with no delta."""
    aggregates: tuple[WindowAggregate, ...]
    """Every aggregate published, tumbling and hopping (``window`` names the size)."""
    deltas: tuple[PaneDelta, ...]
    late: tuple[AnswerOutcome, ...]
    """Outcomes too late for any window: written to ``window.late_topic``."""
    state: MutableMapping[str, Any]
    """The partition's hook state (JSON-ready values), changelogged with the window
    state; write it only from ``in_transaction``."""

    @property
    def empty(self) -> bool:
        return not (self.aggregates or self.deltas or self.late)


InTransaction = Callable[[WindowReport], Sequence[OutboundRecord]]
AfterCommit = Callable[[WindowReport], None]


class ExtensionState(MutableMapping[str, Any]):
    """A view of a partition's window table holding only keys under
    :data:`EXTENSION_PREFIX`, so hook state can never overwrite a pane or a seen mark."""

    def __init__(self, table: MutableMapping[str, Any]) -> None:
        self._table = table

    def __getitem__(self, key: str) -> Any:
        return self._table[EXTENSION_PREFIX + key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._table[EXTENSION_PREFIX + key] = value

    def __delitem__(self, key: str) -> None:
        del self._table[EXTENSION_PREFIX + key]

    def __iter__(self) -> Iterator[str]:
        """Scans the whole table: for restores and tests, not for every tick."""
        return (key[len(EXTENSION_PREFIX) :] for key in list(self._table) if _ours(key))

    def __len__(self) -> int:
        return sum(1 for key in self._table if _ours(key))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and EXTENSION_PREFIX + key in self._table


def _ours(key: str) -> bool:
    return key.startswith(EXTENSION_PREFIX)
