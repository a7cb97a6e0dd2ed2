"""An answer in a language the judge was not measured on is *unverified* in the stream,
never supported: a French answer sent by an outside producer (kcat, librdkafka) through a
real worker process (the rules judge) comes out on the verdicts topic with every claim
``unverified`` and ``LANGUAGE_NOT_SUPPORTED``, not verified, its language named; the
English answer sent beside it is judged as usual."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.contracts.events import AnswerEvent, UnverifiedReason, VerdictLabel
from streamproc.judge.text.language import letters_in
from streamproc.wiring import prepare_topics
from tests.integration.kcat import kcat_or_skip, produce
from tests.integration.test_outside_producers import _collect, _json, _settings, _verdicts
from tests.unit.gate.conftest import event

FRENCH = (
    "Le fournisseur a livré quatre-vingt-dix pièces sur cent [D1]. Une commande "
    "incomplète ne peut être ni livrée ni facturée [D1]."
)
ENGLISH = "Incomplete orders cannot be delivered or billed [D1]."


@pytest.fixture()
def kcat() -> str:
    return kcat_or_skip()


async def test_a_french_answer_is_unverified_and_an_english_one_judged(
    kcat: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap, "lang")
    assert letters_in(FRENCH) >= settings.judge.language.min_letters  # long enough to tell
    run = uuid.uuid4().hex[:6]
    french = AnswerEvent.model_validate(event(FRENCH, event_id=f"fr-{run}"))
    english = AnswerEvent.model_validate(event(ENGLISH, event_id=f"en-{run}"))
    await prepare_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        await asyncio.to_thread(
            produce,
            kcat,
            kafka_bootstrap,
            settings.topics.answers,
            [_json(french), _json(english)],
            codec="none",
        )
        wanted = {french.event_id, english.event_id}
        seen = await _collect(
            settings,
            worker,
            lambda seen: wanted <= set(_verdicts(seen)),
            lambda seen: f"verdicts for {sorted(_verdicts(seen))}",
        )
    finally:
        worker.stop()

    verdicts = _verdicts(seen)
    judged_fr = verdicts[french.event_id].judgement
    assert judged_fr.claims, "the French answer's claims are listed"
    assert {claim.verdict for claim in judged_fr.claims} == {VerdictLabel.UNVERIFIED}
    assert all(
        any(reason.startswith(UnverifiedReason.LANGUAGE_NOT_SUPPORTED) for reason in claim.reasons)
        for claim in judged_fr.claims
    )
    assert not judged_fr.verified
    assert judged_fr.unverified_reason == UnverifiedReason.LANGUAGE_NOT_SUPPORTED
    assert judged_fr.language == "fr"
    assert judged_fr.supported_claims == 0

    judged_en = verdicts[english.event_id].judgement
    assert judged_en.verified and judged_en.unverified_reason is None
    assert [claim.verdict for claim in judged_en.claims] == [VerdictLabel.SUPPORTED]
