"""Names compared up to spelling: acronym dots, accents, a title in front."""

from __future__ import annotations

import pytest

from streamproc.judge.text.name_forms import fold, known_name

EVIDENCE = fold(
    "Russia asked the U.N. Security Council for a vote. U.S.-led strikes went on. "
    "President Barack Obama met Raúl Castro; the late Hugo Chávez was not there."
)


@pytest.mark.parametrize(
    "name",
    ["UN Security Council", "US-led", "Raul Castro", "Hugo Chavez", "President Obama",
     "Barack Obama"],
)  # fmt: skip
def test_the_same_name_spelt_otherwise_is_known(name: str) -> None:
    assert known_name(name, EVIDENCE)


@pytest.mark.parametrize(
    "name",
    ["United States", "Britain", "Senator Obama", "Fidel Castro", "EU", "President Chavez"],
)
def test_other_names_for_a_thing_and_other_titles_are_not(name: str) -> None:
    """Only spelling is forgiven: "United States" is another name for "U.S.", and the
    evidence calls nobody a senator (nor Chavez a president)."""
    assert not known_name(name, EVIDENCE)


def test_fold_undots_acronyms_and_drops_accents_only() -> None:
    assert fold("The U.S. and the E.U., São Paulo, Dr. Who.") == (
        "the us and the eu, sao paulo, dr. who."
    )
