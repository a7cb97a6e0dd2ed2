"""From a judgement to what the caller does: the decision and the text to send.

Pure, so the HTTP server, the Kafka loop and the caller's client (which applies the
policy itself when no reply comes in time) decide alike.

- A verified judgement decides itself: its own action.
- An unverified one (budget, overload, judge error, a language the judge was not measured
  on): fail-open keeps the judgement's action - a pass, unless a claim that *was*
  checked refutes the answer, which is then trimmed or withheld as usual - and the reply
  says ``verified: false``; fail-closed withholds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import Action, AnswerJudgement
from streamproc.contracts.gate_events import FailurePolicy

__all__ = ["Decision", "answer_text", "decide_reply", "decision_for", "trimmed"]


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    answer_text: str


def decision_for(judgement: AnswerJudgement, policy: FailurePolicy) -> Action:
    """The action the caller takes on ``judgement`` under ``policy``."""
    if not judgement.verified and policy == "fail-closed":
        return Action.WITHHOLD
    return judgement.action


def trimmed(answer: str, sentences: Sequence[str]) -> str | None:
    """``answer`` without ``sentences`` (each an exact slice of it, in answer order), the
    rest kept exactly; the whitespace after a removed sentence goes with it (before it,
    for the last one). None when some sentence is not found: then no trim can be made."""
    kept: list[str] = []
    position = 0
    for sentence in sentences:
        start = answer.find(sentence, position) if sentence else -1
        if start < 0:
            return None
        kept.append(answer[position:start])
        position = start + len(sentence)
        while position < len(answer) and answer[position].isspace():
            position += 1
    kept.append(answer[position:])
    text = "".join(kept)
    return text.rstrip() if position >= len(answer) else text


def answer_text(answer: str, action: Action, trim_sentences: Sequence[str]) -> str | None:
    """The text to send: the whole answer on pass, the trimmed answer on trim, "" on
    withhold. None when a trim's sentences cannot be found in the answer."""
    if action is Action.PASS:
        return answer
    if action is Action.TRIM:
        return trimmed(answer, trim_sentences)
    return ""


def decide_reply(answer: str, judgement: AnswerJudgement, policy: FailurePolicy) -> Decision:
    """The action and the text to send. A trim whose sentences cannot be located in the
    answer withholds instead: sending the answer untrimmed would pass a refuted sentence."""
    action = decision_for(judgement, policy)
    text = answer_text(answer, action, judgement.trim_sentences)
    if text is None:
        return Decision(Action.WITHHOLD, "")
    return Decision(action, text)
