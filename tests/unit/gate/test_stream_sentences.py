"""A streamed answer's sentences are the whole answer's, whatever its deltas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.gate.stream_sentences import SentenceStream, StreamedSentence
from streamproc.judge.text.sentences import split_sentences

SAMPLES = Path(__file__).resolve().parents[3] / "streamproc" / "samples"
HARD = [
    'Dr. Smith paid 3.50 USD for order A.B.12 on 5 May. He said "It arrived." Done',
    "See No. 5 and Fig. 2 in the U.S. report. The shop opens at 9 a.m. The queue forms early.",
    "Steps:\n1. Open the app.\n2. Tap Pay.\n- Confirm the amount of 1,250.00 EUR.\nThat is all",
    "Use `x.y()` here. Then call v2.1.3 of the API, e.g. with curl. It works!",
    "Your ticket INC-2024.11.07 is closed. Refund: 12.5%. Questions? Ask us.",
    "Here is a summary in 40 words: The council approved the budget. Work starts soon.",
]


def _answers() -> list[str]:
    texts = list(HARD)
    for path in sorted(SAMPLES.glob("*.answers.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["answer"])
    return texts


ANSWERS = _answers()


def _streamed(text: str, cuts: list[int]) -> list[StreamedSentence]:
    stream = SentenceStream()
    out: list[StreamedSentence] = []
    last = 0
    for cut in sorted(set(cuts)):
        out += stream.feed(text[last:cut])
        last = cut
    out += stream.feed(text[last:])
    return out + stream.end()


def _whole(text: str) -> list[tuple[int, int, str]]:
    return [(s, e, text[s:e]) for s, e in split_sentences(text)]


@pytest.mark.parametrize("text", ANSWERS, ids=range(len(ANSWERS)))
def test_one_character_at_a_time_gives_the_whole_answers_sentences(text: str) -> None:
    got = _streamed(text, list(range(len(text))))
    assert [(s.start, s.end, s.text) for s in got] == _whole(text)
    assert [s.index for s in got] == list(range(len(got)))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_any_deltas_give_the_whole_answers_sentences(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(ANSWERS))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=40))
    got = _streamed(text, cuts)
    assert [(s.start, s.end, s.text) for s in got] == _whole(text)


def test_a_sentence_is_released_once_the_next_has_begun_with_a_whole_word() -> None:
    stream = SentenceStream()
    assert stream.feed("I paid 3.") == []
    assert stream.feed("50 USD. He") == [], "'He' may still grow"
    [first] = stream.feed(" said")
    assert first.text == "I paid 3.50 USD." and first.index == 0
    assert stream.feed(" Dr.") == [] and stream.feed(" Smith ") == []
    assert [s.text for s in stream.end()] == ["He said Dr. Smith"]
    assert stream.end() == [] and stream.text == "I paid 3.50 USD. He said Dr. Smith "


def test_a_sentence_that_ends_only_at_the_end_is_released_at_the_end() -> None:
    stream = SentenceStream()
    assert stream.feed("No full stop here") == []
    assert [s.text for s in stream.end()] == ["No full stop here"]
    with pytest.raises(RuntimeError):
        stream.feed("more")
