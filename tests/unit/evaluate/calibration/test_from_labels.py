"""Refitting the answer calibrator's operating points on labels: the threshold search,
hard-only regimes, the held-out report, and the command writing a calibrator the worker
loads (a fake judge on a RAGTruth slice; the real models run in the slow test below)."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from streamproc.cli.main import main
from streamproc.config import Settings
from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    EvidenceKind,
    JudgeInfo,
    VerdictLabel,
)
from streamproc.evaluate.benchmark import load_items
from streamproc.evaluate.calibration.from_labels import (
    LabelledAnswer,
    choose_threshold,
    fit_operating_points,
    flagged_at,
    in_fit_half,
    regime_reports,
)
from streamproc.evaluate.calibration.label_refit import (
    RefitOptions,
    add_calibrate_arguments,
    refit,
    run_calibrate,
    write_calibrator,
)
from streamproc.inference.calibrator_loader import (
    load_answer_calibrator,
    resolve_answer_calibrator,
)
from streamproc.inference.registry import sha256_of
from streamproc.judge.decision.actions import decide
from streamproc.judge.decision.answer import ANSWER_FEATURES, AnswerCalibrator
from streamproc.judge.decision.calibrator import REGIMES
from streamproc.wiring import build_judge, refit_options


def options() -> RefitOptions:
    """The options ``calibrate`` gets from the environment's settings."""
    return refit_options(Settings())


RAGTRUTH = Path(__file__).resolve().parents[4] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"


def row(
    risk: float | None, label: bool, *, hard: bool = False, finding: bool = False, n: int = 0
) -> LabelledAnswer:
    return LabelledAnswer(
        row_id=f"r{n}",
        task_type="Summary",
        regime="task",
        label=label,
        risk=risk,
        hard=hard,
        hard_finding=finding,
        refuted=True,
        flagged=True,
    )


def base(threshold: float = 0.02, hard_only: Sequence[str] = ()) -> AnswerCalibrator:
    part = {"mean": [0, 0], "scale": [1, 1], "coef": [1, 0], "intercept": 0, "threshold": threshold}
    payload = {
        "name": "base",
        "features": list(ANSWER_FEATURES),
        "regimes": {r: part for r in REGIMES},
        "hard_only_regimes": list(hard_only),
    }
    return AnswerCalibrator.from_payload(payload, sha256="0" * 64)


def test_the_threshold_is_the_lowest_risk_reaching_the_target() -> None:
    rows = [row(0.1, False), row(0.2, False), row(0.3, True), row(0.4, True), row(0.5, True)]
    rows += [row(0.6, True), row(0.7, True), row(0.8, False)]
    # at 0.3: 6 flagged, 5 hallucinated (0.83); at 0.2: 7 flagged, 5 hallucinated (0.71)
    assert choose_threshold(rows, 0.8, min_flagged=3) == 0.3
    assert choose_threshold(rows, 0.8, min_flagged=7) is None, "too few flagged at 0.3"
    assert choose_threshold(rows, 0.95, min_flagged=1) is None
    assert choose_threshold(rows, 0.5, min_flagged=1) == 0.1


def test_flags_follow_the_judges_answer_decision() -> None:
    settled = row(0.01, True, hard=True)
    assert flagged_at(settled, 0.5, False) and not flagged_at(settled, 0.5, True)
    assert flagged_at(row(0.01, True, finding=True), 0.5, True)
    assert not flagged_at(row(None, True), 0.1, False), "no calibrated claim, no risk"
    cleared = LabelledAnswer("x", "QA", "question", True, 0.9, False, False, False, False)
    assert not flagged_at(cleared, 0.1, False), "no claim refuted: never flagged"


def rows_for(regime: str, count: int, informative: bool) -> list[LabelledAnswer]:
    """Hallucinated every other row; risk tracks the label only when ``informative``."""
    out = []
    for i in range(count):
        label = i % 2 == 0
        risk = (0.7 if label else 0.3) if informative else 0.5
        out.append(
            LabelledAnswer(f"{regime}-{i}", regime, regime, label, risk, False, False, True, True)
        )
    return out


def test_a_regime_where_no_threshold_reaches_the_target_becomes_hard_only() -> None:
    rows = rows_for("record", 40, True) + rows_for("task", 40, False)
    points = fit_operating_points(rows, base(), 0.8, seed=3)
    assert points["record"].threshold == 0.7 and not points["record"].hard_only
    assert points["task"].hard_only and "hard findings only" in points["task"].note
    assert points["question"].fit is None and points["question"].threshold == 0.02
    reports = {r.group: r for r in regime_reports(rows, points, seed=3)}
    record = reports["record"]
    held = [r for r in rows if r.regime == "record" and not in_fit_half(r.row_id, 3)]
    assert record.before.n == len(held) and record.after.precision == 1.0
    assert record.before.flag_share == 1.0 and record.after.recall == 1.0
    assert record.before.precision == record.before.positives / record.before.n < 0.8
    assert reports["task"].after.flagged == 0, "no hard findings: nothing flagged"
    assert reports["all"].before.n == sum(not in_fit_half(r.row_id, 3) for r in rows)


def test_the_halves_are_seeded_by_answer_id() -> None:
    ids = [f"ans-{i}" for i in range(200)]
    half = [in_fit_half(i, 7) for i in ids]
    assert half == [in_fit_half(i, 7) for i in ids]
    assert half != [in_fit_half(i, 8) for i in ids]
    assert 70 <= sum(half) <= 130


# ---------------------------------------------------------------- the command, fake judge


class LabelPeekingJudge:
    """Risk follows people's label on record answers (a threshold exists there) and says
    nothing on summaries (none does); a third of hallucinated summaries carry a record
    value mismatch (a hard finding)."""

    info = JudgeInfo(name="fake", version="1", granularity="sentence")

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        return [self._one(a) for a in answers]

    def _one(self, answer: AnswerEvent) -> AnswerJudgement:
        bad = answer.labels is not None and answer.labels.response == "hallucinated"
        record = any(e.kind is EvidenceKind.RECORD for e in answer.evidence)
        jitter = int(hashlib.sha256(answer.answer_id.encode()).hexdigest(), 16) % 100 / 1000
        risk = round(((0.7 if bad else 0.3) if record else 0.5) + jitter, 4)
        hard = bad and not record and jitter < 0.033
        reasons = ["VALUE_MISMATCH: x"] if hard else [f"CALIBRATED_RISK: {risk:.2f} >= 0.02"]
        claim = ClaimVerdict(
            index=0,
            sentence_index=0,
            text=answer.answer[:20],
            start=0,
            end=min(20, len(answer.answer)),
            claim_class=ClaimClass.RULE,
            verdict=VerdictLabel.CONTRADICTED if hard else VerdictLabel.UNSUPPORTED,
            reasons=reasons,
            risk=None if hard else risk,
            signals={"structured_evidence": float(record), "has_question": 0.0},
        )
        judged = decide([claim], [answer.answer], abstained=False, answerable=None)
        return judged.model_copy(update={"answer_risk": risk})


def slice_of_ragtruth(tmp_path: Path, rows: int = 40) -> Path:
    if not RAGTRUTH.is_file():
        pytest.skip("../shared/data/ragtruth_dev.jsonl is not here")
    lines = RAGTRUTH.read_text(encoding="utf-8").splitlines()
    summaries = [line for line in lines if '"task_type": "Summary"' in line][: rows // 2]
    records = [line for line in lines if '"task_type": "Data2txt"' in line][: rows // 2]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(summaries + records) + "\n", encoding="utf-8")
    return path


def arguments(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_calibrate_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_command_writes_a_versioned_calibrator_the_worker_loads(tmp_path: Path) -> None:
    labels = slice_of_ragtruth(tmp_path)
    models = tmp_path / "models"
    out, err = io.StringIO(), io.StringIO()
    args = arguments(
        "--from-labels", str(labels), "--target-precision", "0.8", "--json",
        "--models-dir", str(models), "--out-name", "answers-acme-v2", "--min-flagged", "2",
    )  # fmt: skip
    code = run_calibrate(args, options(), build=lambda _: LabelPeekingJudge(), out=out, err=err)
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["calibrator"] == "answers-acme-v2" and report["labelled_answers"] == 40
    assert report["hard_only_regimes"] == ["task"]
    assert report["regimes"]["record"]["reached_target"]
    assert report["regimes"]["question"]["fit"] is None
    groups = {g["group"]: g for g in report["held_out"]}
    assert groups["task"]["held_out"]["before"]["flag_share"] == 1.0
    after = groups["task"]["held_out"]["after"]
    assert after["precision"] in (None, 1.0), "only hard findings flag"
    assert groups["record"]["held_out"]["after"]["precision"] == 1.0
    assert report["fit_answers"] + report["held_out_answers"] == 40

    loaded = load_answer_calibrator("answers-acme-v2", models)
    assert loaded.hard_only == frozenset({"case", "task"})  # with the base's hard-only "case"
    assert loaded.parts["record"].threshold == report["regimes"]["record"]["threshold"]
    assert loaded.claim_calibrator == "verdict-calibrator-verifier-v11"
    manifest = tomllib.loads((models / "calibrators" / "answers-acme-v2.toml").read_text())
    assert manifest["auto"] is False and manifest["base_calibrator"] == "answer-calibrator-v11"
    assert manifest["fitted_on"]["files"] == ["labels.jsonl"]
    assert manifest["fitted_on"]["labelled_answers"] == 40
    assert manifest["fitted_on"]["target_precision"] == 0.8
    digest = hashlib.sha256(labels.read_bytes()).hexdigest()
    assert manifest["fitted_on"]["files_sha256"]["labels.jsonl"] == digest
    assert "VALUE_MISMATCH" in manifest["hard_reason_codes"]
    # chosen by name only: 'auto' never switches a worker to a deployment's refit
    auto = resolve_answer_calibrator("auto", "verdict-calibrator-verifier-v11", models)
    assert auto is None

    again = run_calibrate(args, options(), build=lambda _: LabelPeekingJudge(), out=out, err=err)
    assert again == 2 and "exists" in err.getvalue(), "never overwrites a calibrator"


def test_the_table_says_where_the_target_was_not_reached(tmp_path: Path) -> None:
    labels = slice_of_ragtruth(tmp_path)
    out = io.StringIO()
    args = arguments("--from-labels", str(labels), "--models-dir", str(tmp_path / "m"))
    assert run_calibrate(args, options(), build=lambda _: LabelPeekingJudge(), out=out) == 0
    text = out.getvalue()
    assert "task: no threshold reaches precision 0.8" in text, "the settings' target"
    assert "hard-only" in text and "STREAMPROC_JUDGE__ANSWER_CALIBRATOR=" in text


def test_a_judge_without_an_answer_calibrator_is_refused(tmp_path: Path) -> None:
    labels = slice_of_ragtruth(tmp_path, rows=4)
    err = io.StringIO()
    rules = refit_options(Settings(judge={"name": "rules"}))
    code = run_calibrate(arguments("--from-labels", str(labels)), rules, err=err)
    assert code == 2 and "refits an answer calibrator" in err.getvalue()


# ------------------------------------------------------------------ the real judge (slow)


def models_copy(tmp_path: Path) -> Path:
    """The repository's models folder, linked file by file, with a calibrators folder of
    its own to write the refit into."""
    repo = Path(__file__).resolve().parents[4] / "models"
    copy = tmp_path / "models"
    (copy / "calibrators").mkdir(parents=True)
    for entry in repo.iterdir():
        if entry.name != "calibrators":
            (copy / entry.name).symlink_to(entry)
    for entry in (repo / "calibrators").iterdir():
        (copy / "calibrators" / entry.name).symlink_to(entry)
    return copy


@pytest.mark.slow
def test_the_worker_loading_the_refit_decides_as_the_fit_predicted(tmp_path: Path) -> None:
    """The NLI judge on 24 RAGTruth rows: the offline decision at the base thresholds is
    the judge's own, and the judge built with the written calibrator (by setting, as the
    worker builds it) flags exactly the held-out answers the report counted."""
    labels = slice_of_ragtruth(tmp_path, rows=24)
    models = models_copy(tmp_path)
    settings = Settings(judge={"inference": {"models_dir": str(models)}})
    result, payload = refit(refit_options(settings), [labels], target=0.8, seed=5, min_flagged=2)
    assert len(result.rows) == 24
    for answer in result.rows:
        base_threshold = result.base.parts[answer.regime].threshold
        assert flagged_at(answer, base_threshold, False) == answer.flagged, answer.row_id
    written = write_calibrator(result, payload, models, "answers-ragtruth-slice")
    refit_settings = Settings(
        judge={"inference": {"models_dir": str(models)}, "answer_calibrator": written.name}
    )
    judge = build_judge(refit_settings.judge)
    assert written.weights is not None
    assert judge.info.models["answers-ragtruth-slice"] == sha256_of(written.weights.read_bytes())
    held = [a for a in result.rows if not in_fit_half(a.row_id, 5)]
    items = {i.row_id: i for i in load_items([labels], "all")}
    judgements = judge.judge_batch([items[a.row_id].case.event for a in held])
    for answer, judgement in zip(held, judgements, strict=True):
        point = written.points[answer.regime]
        expected = flagged_at(answer, point.threshold, point.hard_only)
        assert judgement.hallucinated == expected, answer.row_id


def test_the_main_command_has_calibrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--from-labels", str(tmp_path / "none.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
