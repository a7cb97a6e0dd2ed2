"""Work caps per answer: claims left out are listed unchecked with the cap's code, evidence
over the caps is dropped or cut, and every cap hit is named on the judgement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import islice, product
from typing import Any

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    EvidenceItem,
    VerdictLabel,
)
from streamproc.inference.options import JudgeSettings, LimitSettings
from streamproc.judge import Judge, NliScore
from streamproc.judge.engine import ClaimJudge
from streamproc.judge.limits import JudgeLimits, cap_units
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.rules.checker import RulesChecker
from streamproc.judge.text.evidence import build_units
from streamproc.wiring import build_judge
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

FACT = "The supplier delivered 90 of 100 pieces."
NOTE = f"Incomplete orders cannot be delivered or billed. {FACT}"


def event(answer: str, evidence: list[dict[str, Any]] | None = None) -> AnswerEvent:
    return AnswerEvent.model_validate(
        {
            "event_id": "e",
            "answer_id": "a",
            "conversation_id": "c",
            "tenant": "t",
            "assistant_id": "bot",
            "model": "m",
            "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
            "question": "What about the order?",
            "answer": answer,
            "evidence": evidence if evidence is not None else [{"id": "D1", "text": NOTE}],
        }
    )


def rules_judge(limits: JudgeLimits | None = None) -> ClaimJudge:
    return ClaimJudge(RulesChecker(), granularity="sentence", limits=limits)


def nli_judge(limits: JudgeLimits | None = None, scorer: OverlapScorer | None = None) -> NliJudge:
    return NliJudge(
        scorer or OverlapScorer(),
        BagOfWordsEmbedder(),
        NliOptions(
            thresholds=NliThresholds(entailment=0.6),
            granularity="sentence",
            limits=limits or JudgeLimits(),
        ),
    )


JUDGES: dict[str, Callable[[JudgeLimits | None], Judge]] = {"rules": rules_judge, "nli": nli_judge}


def judge_one(kind: str, answer: AnswerEvent, limits: JudgeLimits | None = None) -> AnswerJudgement:
    judge: Judge = JUDGES[kind](limits)
    [judgement] = judge.judge_batch([answer])
    return judgement


def codes(judgement: AnswerJudgement) -> list[str]:
    return [entry.split(":")[0] for entry in judgement.limits]


def words(count: int) -> list[str]:
    """``count`` distinct lowercase made-up words (no digits, so no number rule fires)."""
    letters = "bcdfghjklmnpqrstvwz"
    return ["".join(p) + "o" for p in islice(product(letters, repeat=3), count)]


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_claims_beyond_the_cap_are_listed_unchecked_and_named(kind: str) -> None:
    judgement = judge_one(kind, event(" ".join([FACT] * 200)))
    checked = [c for c in judgement.claims if c.verdict is not None]
    left = [c for c in judgement.claims if c.verdict is None]
    assert len(judgement.claims) == 200, "nothing is dropped"
    assert [c.index for c in judgement.claims] == list(range(200))
    assert len(checked) == judgement.checked_claims == 64
    assert [c.index for c in checked] == list(range(64)), "the first 64 are checked"
    assert len(left) == 136
    assert left[0].reasons == ["LIMIT_CLAIMS: claim 65 beyond the cap of 64 per answer"]
    assert all(c.reasons[0].startswith("LIMIT_CLAIMS: ") for c in left)
    assert judgement.limits == [
        "LIMIT_CLAIMS: 136 of 200 claims to check left unchecked (cap 64 per answer)"
    ]
    # The verdict is computed from the checked claims (see streamproc.judge.limits).
    assert all(c.verdict is VerdictLabel.SUPPORTED for c in checked)
    assert judgement.faithfulness == 1.0
    assert not judgement.hallucinated
    assert judgement.action is Action.PASS


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_a_claim_over_the_length_cap_is_not_checked(kind: str) -> None:
    long_claim = "The supplier delivered " + "many crates " * 416 + "to the plant."
    assert len(long_claim) > 5000
    judgement = judge_one(kind, event(f"{FACT} {long_claim}"))
    first, second = judgement.claims
    assert first.verdict is VerdictLabel.SUPPORTED
    assert second.verdict is None
    assert second.reasons == [
        f"LIMIT_CLAIM_CHARS: claim of {len(long_claim)} characters, over the cap of 1000"
    ]
    assert codes(judgement) == ["LIMIT_CLAIM_CHARS"]
    assert judgement.checked_claims == 1


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_conversational_claims_do_not_count_towards_the_cap(kind: str) -> None:
    limits = JudgeLimits(max_claims=2)
    answer = event(f"Thanks for reaching out. {FACT} {FACT} {FACT}")
    judgement = judge_one(kind, answer, limits)
    assert [c.verdict is not None for c in judgement.claims] == [False, True, True, False]
    assert judgement.claims[0].reasons == [], "conversational, not capped"
    assert judgement.claims[3].reasons == ["LIMIT_CLAIMS: claim 3 beyond the cap of 2 per answer"]


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_an_answer_over_the_text_cap_is_cut_before_decomposition(kind: str) -> None:
    limits = JudgeLimits(max_claims=2, max_claim_chars=20)  # 40 characters decomposed
    answer = event("Orders ship fast. Bills are paid. Goods arrive late today.")
    judgement = judge_one(kind, answer, limits)
    texts = [c.text for c in judgement.claims]
    assert texts == ["Orders ship fast.", "Bills are paid.", "Goods"], "the tail is not read"
    assert [c.verdict is not None for c in judgement.claims] == [True, True, False]
    assert judgement.claims[2].reasons[0].startswith("LIMIT_CLAIMS: in the sentence cut")
    assert judgement.limits == [
        "LIMIT_CLAIMS: answer of 58 characters cut at 40 before decomposition; the rest was "
        "not checked"
    ]


WORDS = words(3000)


def sentence(k: int) -> str:
    """Sentence ``k``: three words of its own, so no other sentence supports it."""
    a, b, c = WORDS[3 * k : 3 * k + 3]
    return f"The {a} warehouse ships {b} and {c}."


def many_sentences(count: int) -> list[dict[str, Any]]:
    return [{"id": "D1", "text": " ".join(sentence(k) for k in range(count))}]


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_evidence_units_beyond_the_cap_are_not_read(kind: str) -> None:
    answer = event(f"{sentence(1)} {sentence(999)}", many_sentences(1000))
    judgement = judge_one(kind, answer)
    within, beyond = judgement.claims
    assert within.verdict is VerdictLabel.SUPPORTED
    assert beyond.verdict is VerdictLabel.UNSUPPORTED, "its only evidence was dropped"
    # 1,000 sentences and the question: 400 kept (the question first).
    assert judgement.limits == [
        "LIMIT_UNITS: 601 of 1001 evidence units (sentences, fields) dropped beyond the cap "
        "of 400 per answer"
    ]
    uncapped = JUDGES[kind](JudgeLimits(max_evidence_units=2000)).judge_batch([answer])[0]
    assert uncapped.claims[1].verdict is VerdictLabel.SUPPORTED
    assert uncapped.limits == []


class RecordingScorer(OverlapScorer):
    """The overlap scorer, remembering the longest premise it was shown."""

    longest = 0

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        self.longest = max([self.longest, *(len(p) for p, _ in pairs)])
        return super().score(pairs)


def test_a_long_evidence_unit_is_cut_before_the_model_reads_it() -> None:
    long_unit = "The supplier delivered " + "spare parts and " * 400 + "crates"
    scorer = RecordingScorer()
    answer = event(FACT, [{"id": "D1", "text": f"{FACT} {long_unit}."}])
    [judgement] = nli_judge(scorer=scorer).judge_batch([answer])
    assert judgement.claims[0].verdict is VerdictLabel.SUPPORTED
    assert 0 < scorer.longest <= 2000
    # the long sentence and the window that holds it
    assert judgement.limits == [
        f"LIMIT_UNIT_CHARS: 2 evidence unit(s) cut to 2000 characters (longest "
        f"{len(FACT) + 1 + len(long_unit) + 1})"
    ]


def test_the_rules_judge_reads_a_long_unit_cut_too() -> None:
    tail = "spare parts and " * 200 + "the invoice number 77 is wrong."
    answer = event("The invoice number 77 is wrong.", [{"id": "D1", "text": f"{FACT} {tail}"}])
    judgement = judge_one("rules", answer)
    assert codes(judgement) == ["LIMIT_UNIT_CHARS"]
    assert judgement.claims[0].verdict is VerdictLabel.CONTRADICTED, "77 lies beyond the cut"
    uncut = judge_one("rules", answer, JudgeLimits(max_unit_chars=5000))
    assert uncut.claims[0].verdict is VerdictLabel.SUPPORTED
    assert uncut.limits == []


def test_cap_units_keeps_windows_only_over_kept_sentences() -> None:
    units = build_units(None, [EvidenceItem(id="D1", text="One. Two. Three.")], 2)
    assert [u.text for u in units] == ["One.", "Two.", "Three.", "One. Two.", "Two. Three."]
    capped = cap_units(units, JudgeLimits(max_evidence_units=2))
    assert [u.text for u in capped.units] == ["One.", "Two.", "One. Two."]
    assert capped.limits == (
        "LIMIT_UNITS: 1 of 3 evidence units (sentences, fields) dropped beyond the cap of 2 "
        "per answer",
    )
    assert cap_units(units, JudgeLimits()).units == units
    assert cap_units(units, JudgeLimits()).limits == ()


@pytest.mark.parametrize("kind", ["rules", "nli"])
def test_normal_answers_hit_no_cap(kind: str) -> None:
    judgement = judge_one(kind, event(f"{FACT} Incomplete orders can be billed [D1]."))
    assert judgement.limits == []
    assert all(not r.startswith("LIMIT_") for c in judgement.claims for r in c.reasons)


def test_the_factory_passes_the_configured_caps() -> None:
    settings = JudgeSettings(
        name="rules", granularity="sentence", limits=LimitSettings(max_claims=2)
    )
    [judgement] = build_judge(settings).judge_batch([event(" ".join([FACT] * 5))])
    assert judgement.checked_claims == 2
    assert codes(judgement) == ["LIMIT_CLAIMS"]


def test_the_settings_default_to_the_judges_own_caps() -> None:
    """The judge owns its caps; the settings that set them must not drift from them."""
    assert JudgeLimits(**LimitSettings().model_dump()) == JudgeLimits()
