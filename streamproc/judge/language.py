"""A judge that refuses the languages it was not measured on: their answers are
``unverified`` (``LANGUAGE_NOT_SUPPORTED``), never judged by rules that do not read them.

The claim splitter, the abstention and conversation cues, the rules and the NLI models
were all measured on English. A French answer handed to them is not checked, whatever
its verdicts say: a "supported" there would pass an answer off as checked. So
:class:`LanguageCheckedJudge` detects each answer's language first
(:mod:`streamproc.judge.text.language`) and sends only the answers it may judge to the
judge inside it, in one batch, in their order. An answer it refuses is split into
claims (the same caps as the judge's) and every claim is ``unverified``: the window and
the reviewer see what was said, and nothing of it counts as checked.

An answer is refused only when it is probably *not* in a supported language
(``min_confidence``) and has letters enough to tell (``min_letters``); a short or
mixed answer goes to the judge, as before detection existed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import cast

from streamproc.contracts.events import AnswerEvent, AnswerJudgement, JudgeInfo, UnverifiedReason
from streamproc.contracts.reasons import Reason
from streamproc.judge.deadline import AnswerTimedOut
from streamproc.judge.decision.actions import decide, not_checked
from streamproc.judge.limits import JudgeLimits, decompose_within, unverified_verdict, with_limits
from streamproc.judge.protocols import Judge, SettlesCheaply
from streamproc.judge.text.claims import Granularity
from streamproc.judge.text.language import DetectedLanguage, detect_language

__all__ = ["LanguageCheck", "LanguageCheckedJudge"]

_JudgeSome = Callable[[Sequence[AnswerEvent]], list[AnswerJudgement]]
"""Judges the answers kept for the inner judge, in order."""


class LanguageCheck:
    """The decision alone: which answers the judge may read, and the language of each."""

    def __init__(
        self, supported: Collection[str], *, min_letters: int, min_confidence: float
    ) -> None:
        if not supported:
            raise ValueError("no supported language: leave the judge unwrapped instead")
        self.supported = frozenset(code.lower() for code in supported)
        self.min_letters = min_letters
        self.min_confidence = min_confidence

    def detect(self, text: str) -> DetectedLanguage | None:
        """The answer's language, None when it is too short to tell."""
        return detect_language(text, min_letters=self.min_letters)

    def refusal(self, found: DetectedLanguage | None) -> Reason | None:
        """The unverified reason (``"LANGUAGE_NOT_SUPPORTED: ..."``) when the answer is
        probably in a language not supported, else None (judge it)."""
        if found is None or found.code in self.supported:
            return None
        elsewhere = 1.0 - found.probability_of(self.supported)
        if elsewhere < self.min_confidence:
            return None
        return Reason(
            UnverifiedReason.LANGUAGE_NOT_SUPPORTED.value,
            f"detected {found.code} (p={found.probability:.2f}); "
            f"not {'/'.join(sorted(self.supported))} with p={elsewhere:.2f}",
        )


class LanguageCheckedJudge:
    """``inner`` for the answers in a supported language; ``unverified`` for the rest.
    A :class:`~streamproc.judge.protocols.Judge` and ``SettlesCheaply``."""

    def __init__(
        self,
        inner: Judge,
        supported: Collection[str],
        min_letters: int,
        min_confidence: float,
        *,
        limits: JudgeLimits | None = None,
    ) -> None:
        self._inner = inner
        self._check = LanguageCheck(
            supported, min_letters=min_letters, min_confidence=min_confidence
        )
        self._limits = limits or JudgeLimits()

    @property
    def inner(self) -> Judge:
        """The judge the supported answers go to (a script measuring it reads it)."""
        return self._inner

    @property
    def info(self) -> JudgeInfo:
        """The inner judge's, with the detection thresholds: an auditor replays both."""
        info = self._inner.info
        thresholds = {
            **info.thresholds,
            "language_min_confidence": self._check.min_confidence,
            "language_min_letters": float(self._check.min_letters),
        }
        return info.model_copy(update={"thresholds": thresholds})

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        """One judgement per answer, in order; the inner judge is called once, with the
        supported answers. Its :class:`AnswerTimedOut` names the answer's index in
        ``answers``, as the caller expects."""

        def judge(kept: Sequence[AnswerEvent]) -> list[AnswerJudgement]:
            return self._inner.judge_batch(kept, deadline_s=deadline_s)

        return self._split(answers, judge)

    def settle_batch(
        self, answers: Sequence[AnswerEvent], *, reason: UnverifiedReason
    ) -> list[AnswerJudgement]:
        """``SettlesCheaply``: the inner judge's cheap checks for the supported answers;
        an inner judge without any leaves each of their claims ``unverified``."""
        inner = self._inner
        if isinstance(inner, SettlesCheaply):
            return self._split(answers, lambda kept: inner.settle_batch(kept, reason=reason))
        return self._split(
            answers,
            lambda kept: [self._unverified(a, Reason(reason.value), reason, None) for a in kept],
        )

    def _split(
        self,
        answers: Sequence[AnswerEvent],
        judge: _JudgeSome,
    ) -> list[AnswerJudgement]:
        found = [self._check.detect(answer.answer) for answer in answers]
        out: list[AnswerJudgement | None] = [None] * len(answers)
        kept: list[int] = []
        for index, (answer, detected) in enumerate(zip(answers, found, strict=True)):
            refusal = self._check.refusal(detected)
            if refusal is None:
                kept.append(index)
            else:
                out[index] = self._unverified(
                    answer,
                    refusal,
                    UnverifiedReason.LANGUAGE_NOT_SUPPORTED,
                    detected.code if detected else None,
                )
        if kept:
            try:
                judged = judge([answers[i] for i in kept])
            except AnswerTimedOut as timed_out:
                raise AnswerTimedOut(
                    kept[timed_out.index], timed_out.elapsed_s, timed_out.budget_s
                ) from timed_out
            if len(judged) != len(kept):
                raise ValueError(f"judge returned {len(judged)} judgements for {len(kept)}")
            for index, judgement in zip(kept, judged, strict=True):
                detected = found[index]
                out[index] = (
                    judgement
                    if detected is None
                    else judgement.model_copy(update={"language": detected.code})
                )
        return cast(list[AnswerJudgement], out)

    def _unverified(
        self,
        answer: AnswerEvent,
        detail: Reason,
        reason: UnverifiedReason,
        language: str | None,
    ) -> AnswerJudgement:
        """Every claim of the answer ``unverified`` with ``detail``. All of them, the
        conversational ones too: what is conversational was learnt on English."""
        granularity = cast(Granularity, self._inner.info.granularity)
        capped = decompose_within(answer.answer, answer.evidence, granularity, self._limits)
        claims = [unverified_verdict(claim, detail) for claim in capped.shape.claims]
        if not claims:
            judgement = not_checked(reason)
        else:
            judgement = decide(
                capped.verdicts(claims),
                [s.text for s in capped.shape.sentences],
                abstained=False,
                answerable=answer.answerable,
                unverified_reason=reason,
            )
        judgement = with_limits(judgement, capped.limits)
        return (
            judgement if language is None else judgement.model_copy(update={"language": language})
        )
