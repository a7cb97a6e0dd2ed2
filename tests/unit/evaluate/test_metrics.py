"""Span labels, loaders and the sample files."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamproc.cli.evaluate import register
from streamproc.contracts.events import AnswerEvent, VerdictLabel
from streamproc.evaluate import LoadError, judge_cases, load_cases
from streamproc.evaluate.cases import LabelMismatch
from streamproc.evaluate.metrics import agreement, scores
from streamproc.evaluate.reports import render_score
from streamproc.inference.options import JudgeSettings

SAMPLES = Path(__file__).resolve().parents[3] / "streamproc" / "samples"
SHARED = Path(__file__).resolve().parents[3].parent / "shared"
S, C, U = VerdictLabel.SUPPORTED, VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED


def benchmark_row(answer: str, spans: list[dict[str, object]], label: str) -> dict[str, object]:
    return {
        "id": "rt-1",
        "dataset": "RAGTruth",
        "task_type": "Summary",
        "model": "llm-x",
        "question": None,
        "evidence": ["The plant opened in 2019 in Ohio. It employs 300 people."],
        "answer": answer,
        "labels": spans,
        "response_label": label,
    }


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_span_labels_become_claim_labels(tmp_path: Path) -> None:
    answer = "The plant opened in 2019 in Ohio. It employs 500 people. It makes cars."
    spans = [
        {"start": 45, "end": 48, "text": "500", "verdict": "contradicted"},
        {"start": 66, "end": 70, "text": "cars", "verdict": "unsupported"},
    ]
    assert answer[45:48] == "500" and answer[66:70] == "cars"
    cases = load_cases(
        write_jsonl(tmp_path / "rt.jsonl", [benchmark_row(answer, spans, "hallucinated")])
    )
    (result,), _ = judge_cases(cases, JudgeSettings(name="rules", granularity="atomic"))
    assert result.person == (S, C, U)
    assert [c.verdict for c in result.judgement.claims] == [S, C, U]
    agreed = agreement([result])
    assert (agreed.agreed, agreed.caught, agreed.bad, agreed.false_alarms) == (3, 2, 2, 0)
    assert result.person_hallucinated is True


def test_spans_outside_checked_claims_are_counted(tmp_path: Path) -> None:
    answer = "Sure! Here is a summary:\nThe plant opened in 2019 in Ohio."
    spans = [{"start": 0, "end": 5, "verdict": "hallucinated"}]
    cases = load_cases(
        write_jsonl(tmp_path / "rt.jsonl", [benchmark_row(answer, spans, "faithful")])
    )
    (result,), _ = judge_cases(cases, JudgeSettings(name="rules"))
    assert result.uncovered_spans == 1 and result.person == (None, None, S)


def test_claim_labels_must_line_up(tmp_path: Path) -> None:
    row = json.loads((SAMPLES / "seed_lab.answers.jsonl").read_text().splitlines()[0])
    row["labels"]["claims"] = ["supported"]
    cases = load_cases(write_jsonl(tmp_path / "bad.jsonl", [row]))
    with pytest.raises(LabelMismatch, match="3 claims but 1 labels"):
        judge_cases(cases, JudgeSettings(name="rules"))


def test_loader_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event_id": "x"}\n{not json\n', encoding="utf-8")
    with pytest.raises(LoadError, match=re.escape("bad.jsonl:1")):
        load_cases(bad)
    lab = write_jsonl(tmp_path / "lab.jsonl", [{"id": "c1", "retrieved": ["D1"]}])
    with pytest.raises(LoadError, match=re.escape("seed_notes.json")):
        load_cases(lab)


def test_cli_reports_bad_input_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["eval", "score", "--cases", str(tmp_path / "missing.jsonl")])
    assert args.func(args) == 2
    assert "cannot read" in capsys.readouterr().err


def test_every_sample_line_is_an_answer_event() -> None:
    seed = (SAMPLES / "seed_lab.answers.jsonl").read_text(encoding="utf-8").splitlines()
    rag = (SAMPLES / "ragtruth.answers.jsonl").read_text(encoding="utf-8").splitlines()
    events = [AnswerEvent.model_validate_json(line) for line in seed + rag]
    assert len(seed) == 12 and len(rag) == 36
    assert events[0].event_id == "seed-c01" and events[0].assistant_id == "sap-helpdesk"
    assistants = [e.assistant_id for e in events[12:]]
    assert assistants.count("ragtruth-summary") == 18
    assert assistants.count("ragtruth-data2txt") == 18
    assert all(e.labels and e.labels.spans is not None and e.labels.response for e in events[12:])


def test_ragtruth_sample_scores_end_to_end() -> None:
    cases = load_cases(SAMPLES / "ragtruth.answers.jsonl")
    results, infos = judge_cases(cases, JudgeSettings(name="rules", granularity="atomic"))
    assert infos[0].granularity == "atomic"
    score = scores(results, penalty=3)
    assert score.cases == 36 and score.person_known == 36 and score.person_hallucinated == 18
    assert score.answerable_unknown == 36 and score.interval is not None


@pytest.mark.skipif(not (SHARED / "data").exists(), reason="no shared data here")
def test_make_samples_reproduces_the_committed_files(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[3] / "modelwork" / "make_samples.py"
    subprocess.run(
        [sys.executable, str(script), "--shared", str(SHARED), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for name in ("seed_lab.answers.jsonl", "ragtruth.answers.jsonl"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name


def test_unverified_claims_and_answers_are_counted_apart(tmp_path: Path) -> None:
    english = "The plant opened in 2019 in Ohio. It employs 500 people."
    french = "L'usine a ouvert en 2019 dans l'Ohio. Elle emploie 500 personnes."
    spans = [{"start": 45, "end": 48, "text": "500", "verdict": "contradicted"}]
    french_spans = [{"start": 51, "end": 54, "text": "500", "verdict": "contradicted"}]
    assert english[45:48] == "500" and french[51:54] == "500"
    rows = [
        {**benchmark_row(english, spans, "hallucinated"), "id": "rt-en"},
        {**benchmark_row(french, french_spans, "hallucinated"), "id": "rt-fr"},
    ]
    cases = load_cases(write_jsonl(tmp_path / "rt.jsonl", rows))
    (en, fr), _ = judge_cases(cases, JudgeSettings(name="rules", granularity="sentence"))
    assert fr.judgement.verified is False
    assert {c.verdict for c in fr.judgement.claims} == {VerdictLabel.UNVERIFIED}

    agreed = agreement([en, fr])
    alone = agreement([en])
    assert (agreed.claims, agreed.agreed, agreed.caught, agreed.false_alarms) == (
        alone.claims,
        alone.agreed,
        alone.caught,
        alone.false_alarms,
    )
    assert (agreed.answers_bad, agreed.answers_caught) == (alone.answers_bad, 1)
    assert (agreed.unverified, agreed.unverified_answers) == (len(fr.judgement.claims), 1)

    scored = scores([en, fr], 1.0)
    assert (scored.answered, scored.hallucinated) == (1, 1)
    assert scored.claims == len(en.judgement.claims)
    assert (scored.unverified, scored.unverified_claims) == (1, len(fr.judgement.claims))
    assert scored.supported == sum(c.verdict is S for c in en.judgement.claims)
    rendered = render_score(scored, []).text
    assert "Outcomes: correct 0, abstained 0, wrong 1, unverified 1" in rendered
    row = "  answers / claims not verified (outside the above)"
    assert re.search(rf"{re.escape(row)} +1 / {len(fr.judgement.claims)}\n", rendered)
