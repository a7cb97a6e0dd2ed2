"""``LanguageCheckedJudge``: answers in a language the judge was not measured on are
unverified (``LANGUAGE_NOT_SUPPORTED``), never judged and never supported; the rest go
to the judge inside, in one batch, in order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    JudgeInfo,
    Outcome,
    UnverifiedReason,
    VerdictLabel,
)
from streamproc.inference.options import JudgeSettings, LanguageSettings
from streamproc.judge.deadline import AnswerTimedOut
from streamproc.judge.language import LanguageCheckedJudge
from streamproc.judge.protocols import SettlesCheaply
from streamproc.wiring import build_judge

FR_NOTE = (
    "La facture est bloquée lorsque l'écart de prix dépasse la tolérance. L'acheteur "
    "contacte alors le fournisseur et demande un avoir."
)
FR = (
    "La facture est bloquée lorsque l'écart de prix dépasse la tolérance [D1]. L'acheteur "
    "contacte alors le fournisseur et demande un avoir."
)
EN_NOTE = (
    "The invoice is blocked when the price variance is above tolerance. The buyer then "
    "contacts the vendor and asks for a credit memo."
)
EN = "The invoice is blocked when the price variance is above tolerance [D1]."
DE = "Die Rechnung wird gesperrt, wenn die Preisabweichung die Toleranz übersteigt [D1]."
SHORT_FR = "Oui, c'est exact."


def event(answer: str, note: str = EN_NOTE, event_id: str = "e") -> AnswerEvent:
    return AnswerEvent.model_validate(
        {
            "event_id": event_id,
            "answer_id": event_id,
            "conversation_id": "c",
            "tenant": "t",
            "assistant_id": "bot",
            "model": "m",
            "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
            "question": "When is an invoice blocked?",
            "answer": answer,
            "evidence": [{"id": "D1", "text": note}],
        }
    )


def rules() -> LanguageCheckedJudge:
    judge = build_judge(JudgeSettings(name="rules", granularity="sentence"))
    assert isinstance(judge, LanguageCheckedJudge)
    return judge


class Recording:
    """The rules judge, recording each batch it is given; may time out on one answer."""

    def __init__(self, *, time_out_on: str | None = None) -> None:
        self._rules = build_judge(
            JudgeSettings(name="rules", language=LanguageSettings(supported=()))
        )
        self.batches: list[list[str]] = []
        self.settled: list[list[str]] = []
        self.time_out_on = time_out_on

    @property
    def info(self) -> JudgeInfo:
        return self._rules.info

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        self.batches.append([a.event_id for a in answers])
        for index, answer in enumerate(answers):
            if answer.event_id == self.time_out_on:
                raise AnswerTimedOut(index, 2.0, deadline_s or 1.0)
        return self._rules.judge_batch(answers)


class Settling(Recording):
    def settle_batch(
        self, answers: Sequence[AnswerEvent], *, reason: UnverifiedReason
    ) -> list[AnswerJudgement]:
        self.settled.append([a.event_id for a in answers])
        return self._rules.judge_batch(answers)


def wrapped(inner: Recording) -> LanguageCheckedJudge:
    return LanguageCheckedJudge(inner, ("en",), 40, 0.99)


def test_a_french_answer_is_unverified_and_never_supported() -> None:
    # unwrapped, the rules judge reads the French note and the French answer as supported
    bare = build_judge(JudgeSettings(name="rules", language=LanguageSettings(supported=())))
    [judged] = bare.judge_batch([event(FR, FR_NOTE)])
    assert judged.supported_claims > 0

    [judgement] = rules().judge_batch([event(FR, FR_NOTE)])
    assert judgement.verified is False
    assert judgement.unverified_reason is UnverifiedReason.LANGUAGE_NOT_SUPPORTED
    assert judgement.outcome is Outcome.UNVERIFIED
    assert judgement.language == "fr"
    assert judgement.claims
    assert all(c.verdict is VerdictLabel.UNVERIFIED for c in judgement.claims)
    assert judgement.supported_claims == judgement.checked_claims == 0
    assert not judgement.hallucinated
    assert judgement.faithfulness is None
    reason = judgement.claims[0].reasons[0]
    assert reason.startswith("LANGUAGE_NOT_SUPPORTED: detected fr (p=1.00)")


def test_an_english_answer_is_judged_and_says_its_language() -> None:
    [judgement] = rules().judge_batch([event(EN)])
    assert judgement.verified is True
    assert judgement.unverified_reason is None
    assert judgement.language == "en"
    assert judgement.supported_claims == 1


def test_a_short_answer_is_judged_without_a_language() -> None:
    [judgement] = rules().judge_batch([event(SHORT_FR)])
    assert judgement.verified is True
    assert judgement.language is None


def test_only_supported_answers_reach_the_judge_in_one_batch_in_order() -> None:
    inner = Recording()
    answers = [event(FR, event_id="fr"), event(EN, event_id="en1"), event(DE, event_id="de")]
    answers.append(event(SHORT_FR, event_id="short"))
    answers.append(event(EN, event_id="en2"))
    judgements = wrapped(inner).judge_batch(answers)
    assert inner.batches == [["en1", "short", "en2"]]
    assert [j.verified for j in judgements] == [False, True, False, True, True]
    assert [j.language for j in judgements] == ["fr", "en", "de", None, "en"]
    expected = inner._rules.judge_batch([answers[1], answers[3], answers[4]])
    assert [judgements[1], judgements[3], judgements[4]] == [
        expected[0].model_copy(update={"language": "en"}),
        expected[1],
        expected[2].model_copy(update={"language": "en"}),
    ]


def test_a_batch_of_refused_answers_never_calls_the_judge() -> None:
    inner = Recording()
    judgements = wrapped(inner).judge_batch([event(FR), event(DE)])
    assert inner.batches == []
    assert all(j.outcome is Outcome.UNVERIFIED for j in judgements)


def test_a_timeout_names_the_answer_in_the_callers_batch() -> None:
    inner = Recording(time_out_on="en2")
    answers = [event(FR, event_id="fr"), event(DE, event_id="de"), event(EN, event_id="en1")]
    answers.append(event(EN, event_id="en2"))
    with pytest.raises(AnswerTimedOut) as raised:
        wrapped(inner).judge_batch(answers, deadline_s=1.0)
    assert inner.batches == [["en1", "en2"]]  # en2 is 1 of the judge's batch, 3 of ours
    assert raised.value.index == 3
    assert raised.value.budget_s == 1.0


def test_info_is_the_judges_with_the_detection_thresholds() -> None:
    inner = Recording()
    info = wrapped(inner).info
    assert info.name == inner.info.name
    assert info.granularity == inner.info.granularity
    assert info.thresholds == {
        **inner.info.thresholds,
        "language_min_confidence": 0.99,
        "language_min_letters": 40.0,
    }


def test_settling_goes_to_the_judges_cheap_checks() -> None:
    inner = Settling()
    judge = wrapped(inner)
    assert isinstance(judge, SettlesCheaply)
    answers = [event(FR, event_id="fr"), event(EN, event_id="en")]
    settled = judge.settle_batch(answers, reason=UnverifiedReason.BUDGET_EXCEEDED)
    assert inner.settled == [["en"]]
    assert inner.batches == []
    assert settled[0].unverified_reason is UnverifiedReason.LANGUAGE_NOT_SUPPORTED
    assert settled[1].verified is True
    assert settled[1].language == "en"


def test_settling_without_cheap_checks_leaves_every_claim_unverified() -> None:
    inner = Recording()
    answers = [event(FR, event_id="fr"), event(EN, event_id="en")]
    settled = wrapped(inner).settle_batch(answers, reason=UnverifiedReason.BUDGET_EXCEEDED)
    assert inner.batches == []
    assert [j.unverified_reason for j in settled] == [
        UnverifiedReason.LANGUAGE_NOT_SUPPORTED,
        UnverifiedReason.BUDGET_EXCEEDED,
    ]
    assert all(c.verdict is VerdictLabel.UNVERIFIED for c in settled[1].claims)
    assert settled[1].language == "en"


def test_build_judge_wraps_only_when_languages_are_named() -> None:
    assert isinstance(build_judge(JudgeSettings(name="rules")), LanguageCheckedJudge)
    bare = build_judge(JudgeSettings(name="rules", language=LanguageSettings(supported=())))
    assert not isinstance(bare, LanguageCheckedJudge)


def test_a_refused_answer_keeps_the_claim_caps() -> None:
    settings = JudgeSettings(name="rules", granularity="sentence")
    limits = settings.limits.model_copy(update={"max_claims": 1})
    judge = build_judge(settings.model_copy(update={"limits": limits}))
    [judgement] = judge.judge_batch([event(FR * 3)])
    assert judgement.verified is False
    assert any(entry.startswith("LIMIT_CLAIMS") for entry in judgement.limits)
    assert not any(c.verdict is VerdictLabel.SUPPORTED for c in judgement.claims)
