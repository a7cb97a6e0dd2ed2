"""Sentences of an answer that arrives in pieces, released as soon as each is complete.

A streamed answer comes as deltas of any size, down to one character. A sentence can be
checked only once nothing that arrives later can change where it ends: "3." may be the
start of "3.50", "Dr." the start of "Dr. Smith", "No." the start of "No. 5". So the
text is cut exactly as the judge cuts a whole answer (``split_sentences``), and a
sentence is complete once the sentence after it has begun with a whole word. Then the
sentences released over a stream are the whole answer's sentences, whatever the deltas:
checked one by one, they give the verdict the whole answer would get.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from streamproc.judge.text.sentences import split_sentences

__all__ = ["SentenceStream", "StreamedSentence"]


@dataclass(frozen=True, slots=True)
class StreamedSentence:
    """One sentence: its place in the answer and its text (``answer[start:end]``)."""

    index: int
    start: int
    end: int
    text: str


class SentenceStream:
    """Feed deltas, get the sentences they complete; ``end()`` gives the last ones.

    Only the text after the last released sentence is cut again on each delta, so a
    long answer costs about its length once, not once per delta.
    """

    def __init__(self) -> None:
        self._text = io.StringIO()  # one buffer: a delta per character costs no object each
        self._size = 0
        self._pending = ""  # the text after the last released sentence
        self._pending_at = 0  # where it starts in the answer
        self._released = 0
        self._ended = False

    @property
    def text(self) -> str:
        """The answer so far."""
        return self._text.getvalue()

    @property
    def size(self) -> int:
        """Characters received so far."""
        return self._size

    def feed(self, delta: str) -> list[StreamedSentence]:
        """Add ``delta``; the sentences it completes, in order (often none)."""
        if self._ended:
            raise RuntimeError("the stream has ended")
        if not delta:
            return []
        self._text.write(delta)
        self._size += len(delta)
        self._pending += delta
        return self._release(final=False)

    def end(self) -> list[StreamedSentence]:
        """The sentences still open: the answer is whole."""
        if self._ended:
            return []
        self._ended = True
        return self._release(final=True)

    def _release(self, *, final: bool) -> list[StreamedSentence]:
        spans = split_sentences(self._pending)
        complete = spans
        if not final:
            ready = 0
            while ready + 1 < len(spans) and _has_whole_word(self._pending, spans[ready + 1][0]):
                ready += 1
            complete = spans[:ready]
        out: list[StreamedSentence] = []
        for start, end in complete:
            out.append(
                StreamedSentence(
                    index=self._released,
                    start=self._pending_at + start,
                    end=self._pending_at + end,
                    text=self._pending[start:end],
                )
            )
            self._released += 1
        if complete and not final:
            cut = spans[len(complete)][0]  # the next sentence's start: kept pending
            self._pending = self._pending[cut:]
            self._pending_at += cut
        elif final:
            self._pending_at += len(self._pending)
            self._pending = ""
        return out


def _has_whole_word(text: str, start: int) -> bool:
    """Whether the text from ``start`` holds a word followed by whitespace."""
    return any(ch.isspace() for ch in text[start:].lstrip())
