"""Fixtures for the judge tests: the fake models of ``nli_fakes``."""

from __future__ import annotations

import pytest

from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer


@pytest.fixture()
def embedder() -> BagOfWordsEmbedder:
    return BagOfWordsEmbedder()


@pytest.fixture()
def scorer() -> OverlapScorer:
    return OverlapScorer()
