"""Source documents kept for measurement never reach training data.

Public corpora reuse the source documents of the rows kept aside to measure this project
(96 HaluEval summarization documents are RAGTruth or FaithBench sources, for example).
``../shared/data/do_not_train.txt`` lists a fingerprint of each; every builder of
training data for a model, a calibrator or a threshold asks :class:`HeldOut` before it
takes a document or a passage, and says how many it dropped.

Which rows are asked about:

- models (the verifier, the embedders): every document, whatever its source, including
  the calibrate rows of ``../shared/data`` (a RAGTruth document is shared by answers in
  both halves of the split, so a model trained on it has read report rows' evidence);
- calibrators and thresholds: every document from outside ``../shared/data``. Its
  calibrate half stays usable for calibration, as the data README says.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_LIST", "HeldOut", "fingerprint"]

DEFAULT_LIST = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve() / (
    "do_not_train.txt"
)
"""Where the list is in this project's layout (the data sits beside the repository)."""

_WORD = re.compile(r"[a-z0-9]+")


def fingerprint(text: str) -> str:
    """The data README's function, verbatim: sha256 of the first 30 lower-case
    alphanumeric words, joined by single spaces."""
    words = _WORD.findall(text.lower())
    return hashlib.sha256(" ".join(words[:30]).encode()).hexdigest()


@dataclass(slots=True)
class HeldOut:
    """The listed fingerprints, and what each source had dropped because of them."""

    fingerprints: frozenset[str]
    dropped: Counter[str] = field(default_factory=Counter)

    @classmethod
    def load(cls, path: Path = DEFAULT_LIST) -> HeldOut:
        """The list at ``path`` (comment lines start with ``#``). A builder with no list
        cannot know what to keep out, so a missing file is an error, never an empty list."""
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: the list of documents kept for measurement is missing; "
                "no training data is built without it"
            )
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(frozenset(s for line in lines if (s := line.strip()) and s[0] != "#"))

    def listed(self, texts: Iterable[str]) -> bool:
        """Whether any of ``texts`` (a document, or its passages) is on the list."""
        return any(fingerprint(text) in self.fingerprints for text in texts)

    def keep(self, source: str, texts: Iterable[str]) -> bool:
        """False, counted under ``source``, when the document of ``texts`` is listed: it
        is tried whole (its passages joined by newlines, as the list fingerprints a
        source document) and passage by passage."""
        parts = [text for text in texts if text]
        if self.listed(["\n".join(parts), *parts]):
            self.dropped[source] += 1
            return False
        return True

    def summary(self) -> str:
        """One line: how many documents each source had dropped."""
        if not self.dropped:
            return f"held out: no listed document met ({len(self.fingerprints)} listed)"
        counts = ", ".join(f"{source} {n}" for source, n in sorted(self.dropped.items()))
        return f"held out (listed documents dropped): {counts}"
