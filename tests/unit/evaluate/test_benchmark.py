"""``streamproc eval benchmark`` on tiny hand-made rows (never ``../shared``)."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from streamproc.cli.evaluate import register
from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    JudgeInfo,
    Outcome,
    VerdictLabel,
)
from streamproc.evaluate import benchmark, benchmark_command
from streamproc.evaluate.benchmark import (
    Confusion,
    binary_report,
    bootstrap_intervals,
    dump_rows,
    judge_items,
    load_items,
)
from streamproc.evaluate.benchmark_command import run_benchmark
from streamproc.inference.options import JudgeSettings
from streamproc.judge import Judge
from streamproc.rates.stats import wilson_interval
from streamproc.wiring import build_judge

SAMPLES = Path(__file__).resolve().parents[3] / "streamproc" / "samples"
EVIDENCE = ["The plant opened in 2019 in Ohio. It employs 300 people."]
# "500" contradicts the evidence, "cars" is not in it.
RAGTRUTH_ANSWER = "The plant opened in 2019 in Ohio. It employs 500 people. It makes cars."
SPANS = [
    {"start": 45, "end": 48, "text": "500", "verdict": "contradicted"},
    {"start": 66, "end": 70, "text": "cars", "verdict": "unsupported"},
]


def row(
    row_id: str,
    answer: str,
    label: str,
    task: str = "Summary",
    spans: Sequence[dict[str, object]] = (),
) -> dict[str, object]:
    dataset = "HaluEval-QA" if task == "QA" else "RAGTruth"
    return {
        "id": row_id,
        "dataset": dataset,
        "task_type": task,
        "model": "llm-x",
        "question": "Where did the plant open?" if task == "QA" else None,
        "evidence": EVIDENCE,
        "answer": answer,
        "labels": list(spans),
        "response_label": label,
    }


# Rules judge: TN, TP (claim level S, C, U), FP, then HaluEval FN and TN.
ROWS = [
    row("rt-1", "The plant opened in 2019 in Ohio.", "faithful"),
    row("rt-2", RAGTRUTH_ANSWER, "hallucinated", spans=SPANS),
    row("rt-3", "Workers adore the friendly canteen.", "faithful"),
    row("halueval-qa-1-hallucinated", "Ohio", "hallucinated", task="QA"),
    row("halueval-qa-1-right", "2019 in Ohio", "faithful", task="QA"),
]


def write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="streamproc")
    register(parser.add_subparsers())
    return parser.parse_args(argv)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = parse(argv)
    code = args.func(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class FakeJudge:
    """Calls an answer hallucinated when its id is in ``flagged``; records batch sizes."""

    def __init__(self, flagged: set[str]) -> None:
        self.flagged = flagged
        self.batches: list[int] = []

    @property
    def info(self) -> JudgeInfo:
        return JudgeInfo(name="fake", version="0", granularity="sentence")

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        self.batches.append(len(answers))
        return [self._one(a) for a in answers]

    def _one(self, answer: AnswerEvent) -> AnswerJudgement:
        bad = answer.answer_id in self.flagged
        verdict = VerdictLabel.UNSUPPORTED if bad else VerdictLabel.SUPPORTED
        claim = ClaimVerdict(
            index=0,
            sentence_index=0,
            text=answer.answer,
            start=0,
            end=len(answer.answer),
            claim_class=ClaimClass.RULE,
            verdict=verdict,
            score=0.1 if bad else 0.9,
        )
        return AnswerJudgement(
            claims=[claim],
            checked_claims=1,
            supported_claims=int(not bad),
            contradicted_claims=0,
            unsupported_claims=int(bad),
            faithfulness=0.0 if bad else 1.0,
            hallucinated=bad,
            abstained=False,
            outcome=Outcome.WRONG if bad else Outcome.CORRECT,
            action=Action.WITHHOLD if bad else Action.PASS,
        )


# ----------------------------------------------------------------------------- metrics


def test_rules_judge_counts_per_task_and_claims(tmp_path: Path) -> None:
    items = load_items([write_jsonl(tmp_path / "rows.jsonl", ROWS)], "all")
    judge: Judge = build_judge(JudgeSettings(name="rules", granularity="atomic"))
    judgements, _ = judge_items(items, judge, batch_size=2)
    result = benchmark.evaluate(items, judgements)

    assert result.answers.counts == Confusion(tp=1, fp=1, fn=1, tn=2)
    assert result.per_task["Summary"].counts == Confusion(tp=1, fp=1, fn=0, tn=1)
    assert result.per_task["QA"].counts == Confusion(tp=0, fp=0, fn=1, tn=1)
    assert list(result.per_task) == ["QA", "Summary"]
    # Claim level only on the span-labelled (RAGTruth) rows: rt-2's "500" and "cars"
    # are caught, rt-3's one claim is a false alarm, the rest agree.
    assert result.claims is not None
    assert result.claims.counts == Confusion(tp=2, fp=1, fn=0, tn=2)
    assert (result.spans, result.uncovered_spans) == (2, 0)


def test_point_values_and_wilson_intervals() -> None:
    units = [Confusion.of(True, True)] * 6 + [Confusion.of(False, True)] * 2
    units += [Confusion.of(True, False)] * 3 + [Confusion.of(False, False)] * 9
    report = binary_report(units, resamples=200, seed=7)
    assert report.counts == Confusion(tp=6, fp=2, fn=3, tn=9)
    assert report.values["precision"] == pytest.approx(6 / 8)
    assert report.values["recall"] == pytest.approx(6 / 9)
    assert report.values["f1"] == pytest.approx(12 / 17)
    assert report.values["balanced_accuracy"] == pytest.approx((6 / 9 + 9 / 11) / 2)
    assert report.intervals["precision"] == wilson_interval(6, 8)
    assert report.intervals["recall"] == wilson_interval(6, 9)
    low, high = report.intervals["f1"] or (2.0, -1.0)
    assert low <= 12 / 17 <= high
    assert report.methods["f1"] == "bootstrap" and report.methods["recall"] == "wilson"


def test_undefined_metrics_are_none() -> None:
    report = binary_report([Confusion.of(False, False)] * 4, resamples=50)
    assert report.values["precision"] is None and report.values["recall"] is None
    assert report.intervals["f1"] is None and report.intervals["precision"] is None


def test_bootstrap_is_seeded_and_reproducible() -> None:
    units = [Confusion.of(i % 3 == 0, i % 2 == 0) for i in range(60)]
    first = bootstrap_intervals(units, resamples=500, seed=11)
    assert first == bootstrap_intervals(units, resamples=500, seed=11)
    assert first != bootstrap_intervals(units, resamples=500, seed=12)
    assert all(interval is not None for interval in first.values())


def test_claim_level_resamples_answers() -> None:
    report = binary_report([Confusion(2, 1, 0, 3), Confusion(0, 0, 1, 4)], clustered=True)
    assert report.counts == Confusion(2, 1, 1, 7)
    assert report.units == 2
    assert set(report.methods.values()) == {"cluster bootstrap"}


# --------------------------------------------------------------------------------- CLI


def test_json_has_the_required_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    code, out, _ = run_cli(
        ["eval", "benchmark", "--data", str(data), "--split", "all", "--json"], capsys
    )
    assert code == 0
    found = json.loads(out)
    for key in ["n", "precision", "recall", "f1", "balanced_accuracy", "per_task", "split"]:
        assert key in found, key
    for key in ["judge", "elapsed_s", "answers_per_s", "claims", "split_counts"]:
        assert key in found, key
    assert (found["n"], found["split"], found["judge"]) == (5, "all", "rules")
    assert found["precision"] == pytest.approx(0.5)
    assert set(found["per_task"]) == {"QA", "Summary"}
    assert found["claims"]["tp"] == 2


def test_fake_judge_in_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    fake = FakeJudge({"rt-2", "halueval-qa-1-hallucinated", "rt-1"})
    args = parse(["eval", "benchmark", "--data", str(data), "--split", "all", "--json"])
    args.batch_size = 2
    assert run_benchmark(args, JudgeSettings(), build=lambda _: fake) == 0
    found = json.loads(capsys.readouterr().out)
    assert fake.batches == [2, 2, 1]
    assert (found["tp"], found["fp"], found["fn"], found["tn"]) == (2, 1, 0, 2)
    assert found["judge"] == "fake" and found["batch_size"] == 2


def test_split_filter_and_limit(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    every = load_items([data], "all")
    calibrate = load_items([data], "calibrate")
    report = load_items([data], "report")
    assert len(calibrate) + len(report) == len(every) == 5
    assert {i.split for i in calibrate} <= {"calibrate"}
    assert len(load_items([data], "all", limit=2)) == 2


def test_text_report_dump_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    dump, md = tmp_path / "dump.jsonl", tmp_path / "report.md"
    argv = ["eval", "benchmark", "--data", str(data), "--split", "all"]
    code, out, err = run_cli([*argv, "--dump", str(dump), "--output", str(md)], capsys)
    assert code == 0
    assert "Answer level" in out and "Claim level" in out and "Summary" in out
    assert "judged 5/5" not in err  # progress only every few hundred answers
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in ROWS]
    hallucinated = rows[1]
    assert hallucinated["label"] == "hallucinated" and hallucinated["predicted"] is True
    assert [c["person"] for c in hallucinated["claims"]] == [
        "supported",
        "contradicted",
        "unsupported",
    ]
    assert [c["verdict"] for c in hallucinated["claims"]] == [
        "supported",
        "contradicted",
        "unsupported",
    ]
    assert all(c["person"] is None for c in rows[3]["claims"])  # HaluEval: no claim labels
    assert "| task | n | pos |" in md.read_text()


def test_progress_goes_to_stderr(tmp_path: Path) -> None:
    items = load_items([write_jsonl(tmp_path / "rows.jsonl", ROWS)], "all")
    sink = io.StringIO()
    judge_items(items, FakeJudge(set()), batch_size=2, progress=sink, every=2)
    assert sink.getvalue().count("judged") == 2  # after 2 and after 4 answers


def test_in_repo_answer_events_work(capsys: pytest.CaptureFixture[str]) -> None:
    sample = SAMPLES / "ragtruth.answers.jsonl"
    code, out, _ = run_cli(
        ["eval", "benchmark", "--data", str(sample), "--split", "all", "--json"], capsys
    )
    assert code == 0
    found = json.loads(out)
    assert found["n"] == 36 and set(found["per_task"]) == {"Summary", "Data2txt"}
    assert found["per_task"]["Summary"]["positives"] == 9
    assert found["claims"] is not None


def test_missing_default_data_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(benchmark_command, "default_data_files", lambda: [tmp_path / "nope.jsonl"])
    code, _, err = run_cli(["eval", "benchmark"], capsys)
    assert code == 2
    assert "default benchmark files are missing" in err and "--data" in err


def test_lab_cases_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = write_jsonl(tmp_path / "lab.jsonl", [{"id": "c1", "retrieved": ["D01"]}])
    code, _, err = run_cli(["eval", "benchmark", "--data", str(lab)], capsys)
    assert code == 2 and "lab.jsonl:1" in err


FRENCH = (
    "L'usine a ouvert en 2019 dans l'Ohio. Elle emploie 500 personnes et fabrique des voitures."
)


def test_unverified_answers_are_in_neither_level_and_never_faithful(tmp_path: Path) -> None:
    french = [
        row("rt-fr-1", FRENCH, "hallucinated", spans=[{"start": 51, "end": 54, "text": "500"}]),
        row("rt-fr-2", FRENCH, "faithful"),
    ]
    path = write_jsonl(tmp_path / "rows.jsonl", [*ROWS, *french])
    items = load_items([path], "all")
    judge: Judge = build_judge(JudgeSettings(name="rules", granularity="atomic"))
    judgements, _ = judge_items(items, judge, batch_size=3)
    assert [j.verified for j in judgements] == [True] * len(ROWS) + [False, False]
    result = benchmark.evaluate(items, judgements)

    # exactly the counts of the English rows alone
    assert result.answers.counts == Confusion(tp=1, fp=1, fn=1, tn=2)
    assert result.claims is not None
    assert result.claims.counts == Confusion(tp=2, fp=1, fn=0, tn=2)
    assert result.unverified == 2
    assert result.no_checked_claims == 0
    rows = list(dump_rows(items, judgements, judge.info))
    assert [(r["predicted"], r["verified"], r["unverified_reason"]) for r in rows[-2:]] == [
        (None, False, "LANGUAGE_NOT_SUPPORTED")
    ] * 2
