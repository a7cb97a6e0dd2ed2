"""Gate test helpers: requests, a judge whose model is slow, settings."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.gate.options import GateSettings
from streamproc.gate.request import GateRequest, http_origin
from streamproc.judge import NliScore
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.verdicts.output_topic import OutHeaders
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

NOTE = "Incomplete orders cannot be delivered or billed. The supplier delivered 90 of 100 pieces."


def event(answer: str, *, event_id: str = "e1", tenant: str = "t", **extra: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "c",
        "tenant": tenant,
        "assistant_id": "bot",
        "model": "m",
        "occurred_at": datetime.now(UTC).isoformat(),
        "question": "What happened to the order?",
        "answer": answer,
        "evidence": [{"id": "D1", "text": NOTE}],
        **extra,
    }


def request(
    fields: dict[str, Any],
    *,
    budget_ms: float = 500.0,
    headers: OutHeaders = (),
    trace_id: str | None = None,
) -> GateRequest:
    body = json.dumps(fields).encode()
    return GateRequest(
        body=body,
        answer=AnswerEvent.model_validate_json(body),
        budget_ms=budget_ms,
        arrived=time.monotonic(),
        origin=http_origin(),
        headers=headers,
        trace_id=trace_id,
    )


def settings(**gate: Any) -> Settings:
    return Settings(gate=GateSettings(**gate))


class SlowScorer(OverlapScorer):
    """The fake NLI model, taking ``delay_s`` per call once ``delay_s`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.delay_s = 0.0

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().score(pairs)


def slow_nli(scorer: SlowScorer) -> NliJudge:
    return NliJudge(
        scorer,
        BagOfWordsEmbedder(),
        NliOptions(thresholds=NliThresholds(entailment=0.6), granularity="sentence"),
    )
