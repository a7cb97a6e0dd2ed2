"""Which words of a claim count as names the evidence must contain."""

from __future__ import annotations

from streamproc.judge.nli.retrieval import names


def test_a_possessive_names_the_owner() -> None:
    found = names("The article highlights Obama's efforts and the Red Cross' appeal.")
    assert found == {"obama", "red cross"}


def test_a_sentence_s_first_word_is_not_a_name_unless_a_run_continues() -> None:
    assert names("However, Acme Corp shipped. Then Paris's mayor spoke.") == {
        "acme corp",
        "paris",
    }
