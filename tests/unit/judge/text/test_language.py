"""Language detection: what an answer is written in, once what is not language is out."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streamproc.judge.text.language import detect_language, language_text, letters_in

FIXTURE = Path(__file__).with_name("non_english_answers.jsonl")
NON_ENGLISH = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]

ENGLISH = (
    "The invoice is blocked when the price variance is above the 2 % tolerance [D08]. The "
    "buyer then contacts the vendor (https://example.com/po/55012) and asks for a credit memo."
)


def test_citations_numbers_and_urls_are_not_language() -> None:
    text = "See [D07] and [1, 2]: 120.00 EUR on 2026-01-01, https://x.example/a?b=1 www.y.org"
    assert language_text(text) == "See and : EUR on ,"


def test_letters_of_scripts_without_spaces_count_twice() -> None:
    assert letters_in("abc d") == 4
    assert letters_in("合同可以") == 8
    assert letters_in("Договор") == 7


def test_an_english_answer_is_english() -> None:
    found = detect_language(ENGLISH, min_letters=40)
    assert found is not None
    assert found.code == "en"
    assert found.probability > 0.99
    assert found.probability_of({"en"}) == found.probability


def test_too_few_letters_is_not_guessed() -> None:
    assert detect_language("Paris. [D1] 1889, 330 m.", min_letters=40) is None
    assert detect_language("Oui, c'est exact.", min_letters=40) is None
    assert detect_language("Oui, c'est exact.", min_letters=5) is not None


@pytest.mark.parametrize("row", NON_ENGLISH, ids=lambda row: row["language"])
def test_every_fixture_answer_is_found_in_its_language(row: dict[str, str]) -> None:
    found = detect_language(row["answer"], min_letters=40)
    assert found is not None
    assert found.code == row["language"]
    assert 1 - found.probability_of({"en"}) > 0.999


def test_related_languages_share_the_mass() -> None:
    # a short Chinese sentence: zh and wuu split it, English has none of it
    short = min((row["answer"] for row in NON_ENGLISH if row["language"] == "zh"), key=len)
    found = detect_language(short, min_letters=40)
    assert found is not None
    assert found.code == "zh"
    assert found.probability < 0.99
    assert found.probability_of({"zh", "wuu", "yue"}) > 0.99
    assert found.probability_of({"en"}) < 0.001


def test_threads_share_one_model_and_agree() -> None:
    texts = [ENGLISH, *(row["answer"] for row in NON_ENGLISH)] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda text: detect_language(text, min_letters=40), texts))
    alone = [detect_language(text, min_letters=40) for text in texts]
    assert found == alone


def test_a_long_answer_is_read_only_in_part() -> None:
    found = detect_language(ENGLISH * 500, min_letters=40)
    assert found is not None
    assert found.code == "en"
