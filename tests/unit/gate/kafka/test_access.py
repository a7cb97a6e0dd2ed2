"""Who may use the gate's Kafka requests and where replies may go, without a broker: a
reply topic outside ``gate.reply_topic_pattern`` or one streamproc itself reads or writes
is refused with nothing written there; a request without a valid token, or for a tenant
its token does not name, is refused with a GateError reply and a dead letter."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from streamproc.config import Settings
from streamproc.contracts.events import DeadLetterReason, Verdict
from streamproc.contracts.gate_events import GateError
from streamproc.gate.http.auth import caller_stanza
from streamproc.gate.kafka.loop import GateRequestLoop
from streamproc.gate.kafka.reply_topics import ReplyTopics
from streamproc.gate.service import GateService
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_gate, gate_request_loop, internal_topics, reply_topic_rule
from tests.unit.gate.kafka.test_loop import (
    REPLIES,
    REQUESTS,
    Recorder,
    _body,
    _dead,
    _headers,
    _outbound,
    _record,
)

TOKEN = "acme-caller-token"
OTHER_TOKEN = "globex-caller-token"


@pytest.fixture(scope="module")
async def service() -> AsyncIterator[GateService]:
    gate = build_gate(
        Settings(judge={"name": "rules"}), telemetry=Telemetry.disabled(), sensor=Recorder()
    )
    await gate.start()
    yield gate
    await gate.close()


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "callers.toml"
    path.write_text(
        caller_stanza("acme-bot", ["acme"], TOKEN)
        + "\n"
        + caller_stanza("globex-bot", ["globex"], OTHER_TOKEN)
    )
    return path


def _settings(**gate: Any) -> Settings:
    return Settings(judge={"name": "rules"}, gate=gate)


def _loop(service: GateService, settings: Settings, *extra_topics: str) -> GateRequestLoop:
    loop = gate_request_loop(settings, service)
    known = {REQUESTS, REPLIES, settings.gate.replies_topic, *internal_topics(settings)}

    async def cluster() -> set[str]:
        return known | set(extra_topics)

    loop.reply_topics = ReplyTopics(cluster)
    return loop


def _with_token(token: str | None, **headers: Any) -> list[tuple[str, bytes]]:
    base = _headers(**headers)
    return base if token is None else [*base, ("Authorization", f"Bearer {token}".encode())]


# ---------------------------------------------------------------------------- reply topics


@pytest.mark.parametrize(
    "pick",
    [
        lambda s: s.topics.verdicts,
        lambda s: s.topics.answers,
        lambda s: s.topics.dead_letter,
        lambda s: s.audit.topic,
        lambda s: s.audit.checkpoint_topic,
        lambda s: s.review.queue_topic,
        lambda s: s.review.labels_topic,
        lambda s: s.gate.requests_topic,
        lambda s: f"{s.app_id}.window-state-changelog",
        lambda s: f"{s.app_id}.judge-dedup-changelog",
    ],
    ids=[
        "verdicts",
        "answers",
        "dead-letter",
        "audit",
        "audit-checkpoints",
        "review-queue",
        "labels",
        "gate-requests",
        "window-changelog",
        "dedup-changelog",
    ],
)
async def test_a_reply_topic_streamproc_uses_is_refused_whatever_the_pattern(
    service: GateService, pick: Any
) -> None:
    settings = _settings(kafka_auth="none", reply_topic_pattern=".*")
    target = pick(settings)
    loop = _loop(service, settings, target)
    body = _body()
    records = await _outbound(loop, _record(body, _headers(reply_topic=target.encode())))

    assert [r.topic for r in records] == [settings.topics.dead_letter]
    [letter] = _dead(records)
    assert letter.reason == DeadLetterReason.REPLY_TOPIC_REFUSED
    assert "reads or writes" in letter.error
    assert base64.b64decode(letter.value_b64) == body


async def test_a_reply_topic_outside_the_pattern_is_refused_and_inside_it_answered(
    service: GateService,
) -> None:
    settings = _settings(kafka_auth="none")
    loop = _loop(service, settings, "caller.replies")
    outside = await _outbound(loop, _record(_body(), _headers(reply_topic=b"caller.replies")))
    inside = await _outbound(loop, _record(_body(), _headers()))
    default = await _outbound(
        loop, _record(_body(), _headers(reply_topic=settings.gate.replies_topic.encode()))
    )

    assert [r.topic for r in outside] == [settings.topics.dead_letter]
    assert _dead(outside)[0].reason == DeadLetterReason.REPLY_TOPIC_REFUSED
    assert "does not match gate.reply_topic_pattern" in _dead(outside)[0].error
    assert REPLIES in {r.topic for r in inside} and settings.topics.verdicts in {
        r.topic for r in inside
    }
    assert settings.gate.replies_topic in {r.topic for r in default}


def test_the_rule_allows_the_prefix_and_the_default_topic_only() -> None:
    rule = reply_topic_rule(Settings())
    assert rule.refusal("gate.replies.team-a") is None
    assert rule.refusal(Settings().gate.replies_topic) is None
    assert rule.refusal("gate.replies.") is not None  # the prefix alone names no caller
    assert rule.refusal("gate.repliesX") is not None
    assert rule.refusal(Settings().topics.verdicts) is not None


def test_a_pattern_that_is_not_a_regular_expression_is_a_settings_error() -> None:
    with pytest.raises(ValueError, match="reply_topic_pattern is not a regular expression"):
        _settings(reply_topic_pattern="gate.replies.(")


# ---------------------------------------------------------------------------- tokens


async def test_a_request_with_its_callers_token_is_answered(
    service: GateService, tokens: Path
) -> None:
    settings = _settings(tokens_file=tokens)
    records = await _outbound(
        _loop(service, settings), _record(_body(tenant="acme"), _with_token(TOKEN))
    )

    [verdict] = [r for r in records if r.topic == settings.topics.verdicts]
    assert Verdict.model_validate_json(verdict.value or b"").tenant == "acme"
    assert _dead(records) == []
    assert not any(TOKEN.encode() in value for r in records for _, value in r.headers)


@pytest.mark.parametrize(
    ("token", "tenant", "code"),
    [
        (None, "acme", "unauthorized"),
        ("not-a-token", "acme", "unauthorized"),
        (OTHER_TOKEN, "acme", "forbidden"),
    ],
    ids=["no-token", "unknown-token", "other-tenants-token"],
)
async def test_a_request_without_a_valid_token_for_its_tenant_is_refused(
    service: GateService, tokens: Path, token: str | None, tenant: str, code: str
) -> None:
    settings = _settings(tokens_file=tokens)
    body = _body(tenant=tenant)
    records = await _outbound(_loop(service, settings), _record(body, _with_token(token)))

    assert not any(r.topic == settings.topics.verdicts for r in records)
    [reply] = [r for r in records if r.topic == REPLIES]
    assert GateError.model_validate_json(reply.value or b"").error == code
    [letter] = _dead(records)
    assert letter.reason == DeadLetterReason.UNAUTHORIZED
    assert base64.b64decode(letter.value_b64) == body


async def test_a_bearer_token_in_another_scheme_is_refused(
    service: GateService, tokens: Path
) -> None:
    headers = [*_headers(), ("authorization", f"Basic {TOKEN}".encode())]
    settings = _settings(tokens_file=tokens)
    records = await _outbound(_loop(service, settings), _record(_body(tenant="acme"), headers))
    assert [d.reason for d in _dead(records)] == [DeadLetterReason.UNAUTHORIZED]


async def test_without_a_tokens_file_every_kafka_request_is_refused(service: GateService) -> None:
    settings = _settings()
    records = await _outbound(_loop(service, settings), _record(_body(), _with_token(TOKEN)))
    [letter] = _dead(records)
    assert letter.reason == DeadLetterReason.UNAUTHORIZED and "no tokens file" in letter.error
