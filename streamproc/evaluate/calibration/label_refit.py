"""``streamproc calibrate --from-labels FILE...``: judge labelled answers, refit the answer
calibrator's operating points for a target precision, write it as a new versioned
calibrator, and report before / after on the rows it did not fit.

The fitting is :mod:`~streamproc.evaluate.calibration.from_labels`; this module runs the
configured judge, reads the base answer calibrator (the one that judge uses), writes the
new weights and manifest (``auto = false``: the worker runs it only when named,
``STREAMPROC_JUDGE__ANSWER_CALIBRATOR=<name>``), and prints a table or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from streamproc.evaluate.benchmark import judge_items, load_items
from streamproc.evaluate.calibration.from_labels import (
    DEFAULT_MIN_FLAGGED,
    LabelledAnswer,
    OperatingPoint,
    RegimeReport,
    fit_operating_points,
    in_fit_half,
    labelled_answer,
    regime_reports,
)
from streamproc.evaluate.loaders import LoadError
from streamproc.inference.calibrator_loader import (
    ANSWER_KIND,
    answer_calibrator_source,
    calibrators_folder,
    load_answer_calibrator,
    resolve_answer_calibrator,
)
from streamproc.inference.judges import build_judge
from streamproc.inference.options import JudgeSettings
from streamproc.inference.registry import sha256_of
from streamproc.judge import Judge
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrator import REGIMES
from streamproc.judge.decision.hard_findings import HARD_REASON_CODES

__all__ = [
    "DEFAULT_SEED",
    "Refit",
    "RefitOptions",
    "add_calibrate_arguments",
    "refit",
    "run_calibrate",
]

DEFAULT_SEED = 20261202


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-labels",
        type=Path,
        nargs="+",
        required=True,
        metavar="FILE",
        help="labelled answers: `review export` rows or benchmark / AnswerEvent JSONL",
    )
    parser.add_argument(
        "--target-precision",
        type=float,
        help="precision to fit for (default: STREAMPROC_LABELS__TARGET_PRECISION)",
    )
    parser.add_argument("--out-name", help="new calibrator's name (default: base + inputs' hash)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="fit / held-out split seed")
    parser.add_argument(
        "--min-flagged",
        type=int,
        default=DEFAULT_MIN_FLAGGED,
        help=f"a threshold must flag this many fit answers (default {DEFAULT_MIN_FLAGGED})",
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        help="where to write calibrators/<name>.json/.toml (default: the configured models dir)",
    )
    parser.add_argument("--batch-size", type=int, help="answers per judge call")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@dataclass(frozen=True, slots=True)
class RefitOptions:
    """What ``calibrate --from-labels`` takes from the settings (the entry point builds
    it once): the judge whose answer calibrator is refitted, the batch size without
    ``--batch-size`` (``worker.batch_max``) and the precision without
    ``--target-precision`` (``labels.target_precision``)."""

    judge: JudgeSettings
    batch_max: int
    target_precision: float


@dataclass(frozen=True, slots=True)
class Refit:
    """What one run fitted, measured and wrote."""

    name: str
    base: AnswerCalibrator
    files: tuple[Path, ...]
    target: float
    seed: int
    min_flagged: int
    rows: tuple[LabelledAnswer, ...]
    unlabelled: int
    points: Mapping[str, OperatingPoint]
    reports: tuple[RegimeReport, ...]
    weights: Path | None = None
    manifest: Path | None = None


def _judged(
    files: Sequence[Path], judge: Judge, batch_size: int, progress: TextIO | None
) -> tuple[list[LabelledAnswer], int]:
    items = load_items(files, "all")
    labelled = [i for i in items if i.label is not None]
    judgements, _ = judge_items(labelled, judge, batch_size, progress)
    rows = [
        labelled_answer(i.row_id, i.task_type, bool(i.label), i.case.event, j)
        for i, j in zip(labelled, judgements, strict=True)
    ]
    return rows, len(items) - len(labelled)


def _base_name(judge: JudgeSettings) -> str:
    name = None
    if judge.name == "nli":
        name = resolve_answer_calibrator(
            judge.answer_calibrator, judge.calibrator, judge.inference.models_dir
        )
    if name is None:
        raise ValueError(
            "calibrate --from-labels refits an answer calibrator: configure the NLI judge "
            "with a claim calibrator and an answer calibrator (STREAMPROC_JUDGE__*)"
        )
    return name


def refit(
    options: RefitOptions,
    files: Sequence[Path],
    *,
    target: float,
    seed: int,
    min_flagged: int = DEFAULT_MIN_FLAGGED,
    batch_size: int | None = None,
    build: Callable[[Any], Judge] = build_judge,
    progress: TextIO | None = None,
) -> tuple[Refit, dict[str, Any]]:
    """Judge ``files`` with the configured judge and refit its answer calibrator; the
    refit and the base calibrator's weights payload."""
    base_name = _base_name(options.judge)
    _, base_payload, base_sha = answer_calibrator_source(
        base_name, options.judge.inference.models_dir
    )
    base = AnswerCalibrator.from_payload(base_payload, sha256=base_sha)
    judge = build(options.judge)
    rows, unlabelled = _judged(files, judge, batch_size or options.batch_max, progress)
    if not rows:
        raise LoadError("no labelled answers (response_label) in the given files")
    points = fit_operating_points(rows, base, target, seed, min_flagged)
    result = Refit(
        name="",
        base=base,
        files=tuple(files),
        target=target,
        seed=seed,
        min_flagged=min_flagged,
        rows=tuple(rows),
        unlabelled=unlabelled,
        points=points,
        reports=tuple(regime_reports(rows, points, seed)),
    )
    return result, base_payload


def _inputs_sha(files: Sequence[Path]) -> dict[str, str]:
    return {path.name: sha256_of(path.read_bytes()) for path in files}


def refit_payload(
    name: str, base_payload: Mapping[str, Any], points: Mapping[str, OperatingPoint]
) -> dict[str, Any]:
    """The base calibrator's weights with the refit thresholds and hard-only regimes; a
    regime the labels do not refit (the case regime) keeps the base's part as it is."""
    regimes = {
        r: {**dict(base_payload["regimes"][r]), "threshold": points[r].threshold} for r in REGIMES
    }
    kept = {r: dict(p) for r, p in base_payload["regimes"].items() if r not in REGIMES}
    hard_only = {r for r, p in points.items() if p.hard_only}
    hard_only |= {r for r in base_payload.get("hard_only_regimes", []) if r in kept}
    return {
        "name": name,
        "kind": base_payload.get("kind", "logistic_regression_per_regime"),
        "features": list(base_payload["features"]),
        "claim_calibrator": base_payload.get("claim_calibrator"),
        "regimes": {**regimes, **kept},
        "hard_only_regimes": sorted(hard_only),
    }


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _metrics_lines(reports: Sequence[RegimeReport]) -> list[str]:
    lines = []
    for report in reports:
        for when, counts in (("before", report.before), ("after", report.after)):
            values = ", ".join(
                f"{k} = {json.dumps(v)}" for k, v in counts.as_json().items() if v is not None
            )
            lines.append(f'"{report.group}-{when}" = {{ {values} }}')
    return lines


def manifest_text(result: Refit, sha: str, inputs: Mapping[str, str]) -> str:
    """The new calibrator's manifest: the base it came from, what it was fitted on, and
    held-out before / after (the shape of the trained calibrators' manifests)."""
    points = result.points
    thresholds = ", ".join(f"{r} = {points[r].threshold}" for r in REGIMES)
    hard_only = sorted(
        {r for r, p in points.items() if p.hard_only} | (result.base.hard_only - set(REGIMES))
    )
    fit_rows = sum(in_fit_half(r.row_id, result.seed) for r in result.rows)
    notes = [f"{r}: {points[r].note}" for r in REGIMES]
    lines = [
        "# Answer calibrator written by `streamproc calibrate --from-labels` on "
        f"{datetime.now(UTC).date().isoformat()}.",
        f"name = {_toml_string(result.name)}",
        f'kind = "{ANSWER_KIND}"',
        "description = \"The base answer calibrator's weights with operating points refit on "
        "reviewers' labels for a target precision; hard-only regimes flag only hard "
        'findings (streamproc/judge/decision/hard_findings.py)."',
        "licence = " + _toml_string(f"the labels' own terms; weights from {result.base.name}"),
        f"features = {json.dumps(list(result.base.features))}",
        f"claim_calibrator = {_toml_string(str(result.base.claim_calibrator))}",
        f"base_calibrator = {_toml_string(result.base.name)}",
        f"base_sha256 = {_toml_string(result.base.sha256)}",
        f"thresholds = {{ {thresholds} }}",
        f"hard_only_regimes = {json.dumps(hard_only)}",
        f"hard_reason_codes = {json.dumps(sorted(HARD_REASON_CODES))}",
        "auto = false  # run it by name: STREAMPROC_JUDGE__ANSWER_CALIBRATOR=" + result.name,
        "",
        "[weights]",
        f"path = {_toml_string(result.name + '.json')}",
        f'sha256 = "{sha}"',
        "",
        "[fitted_on]",
        f"files = {json.dumps([p.name for p in result.files], ensure_ascii=False)}",
        "files_sha256 = { "
        + ", ".join(f"{_toml_string(k)} = {_toml_string(v)}" for k, v in inputs.items())
        + " }",
        f"labelled_answers = {len(result.rows)}",
        f"unlabelled_skipped = {result.unlabelled}",
        f"fit_answers = {fit_rows}",
        f"held_out_answers = {len(result.rows) - fit_rows}",
        f"target_precision = {result.target}",
        f"min_flagged = {result.min_flagged}",
        f"seed = {result.seed}",
        "split = \"sha256('<seed>:<answer id>') first byte even -> fit, odd -> held out\"",
        f"notes = {json.dumps(notes, ensure_ascii=False)}",
        "",
        "[metrics]",
        "# Held-out answers (never fitted on): the configured judge (before) against this",
        "# calibrator (after), per regime and all.",
        *_metrics_lines(result.reports),
    ]
    return "\n".join(lines) + "\n"


def write_calibrator(
    result: Refit, base_payload: Mapping[str, Any], models_dir: Path | None, name: str | None
) -> Refit:
    """Write ``<name>.json`` + ``.toml`` under ``models_dir/calibrators``; refuses to
    overwrite, and reads the written calibrator back through the worker's loader."""
    inputs = _inputs_sha(result.files)
    if name is None:
        digest = sha256_of(json.dumps([inputs, result.target, result.seed]).encode())
        name = f"{result.base.name}-labels-{digest[:8]}"
    folder = calibrators_folder(models_dir)
    weights, manifest = folder / f"{name}.json", folder / f"{name}.toml"
    if "/" in name or weights.exists() or manifest.exists():
        raise FileExistsError(f"calibrator {name!r} exists in {folder}: choose another --out-name")
    named = replace(result, name=name)
    data = (json.dumps(refit_payload(name, base_payload, result.points), indent=1) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(data)
    manifest.write_text(manifest_text(named, sha256_of(data), inputs), encoding="utf-8")
    load_answer_calibrator(name, models_dir)  # what the worker will do: fails loudly here
    return replace(named, weights=weights, manifest=manifest)


# ------------------------------------------------------------------------------ reports


def _point_json(point: OperatingPoint, base: AnswerCalibrator) -> dict[str, Any]:
    return {
        "threshold_before": base.parts[point.regime].threshold,
        "hard_only_before": point.regime in base.hard_only,
        "threshold": point.threshold,
        "hard_only": point.hard_only,
        "reached_target": point.fit is not None and not point.hard_only,
        "fit": None if point.fit is None else point.fit.as_json(),
        "note": point.note,
    }


def refit_json(result: Refit) -> dict[str, Any]:
    fit_rows = sum(in_fit_half(r.row_id, result.seed) for r in result.rows)
    groups = []
    for report in result.reports:
        entry: dict[str, Any] = {
            "group": report.group,
            "task_types": list(report.task_types),
            "held_out": {"before": report.before.as_json(), "after": report.after.as_json()},
        }
        if report.point is not None:
            entry["operating_point"] = _point_json(report.point, result.base)
            entry["by_task_type"] = {
                task: {"before": b.as_json(), "after": a.as_json()}
                for task, (b, a) in report.by_task.items()
            }
        groups.append(entry)
    return {
        "calibrator": result.name,
        "base_calibrator": result.base.name,
        "weights": None if result.weights is None else str(result.weights),
        "manifest": None if result.manifest is None else str(result.manifest),
        "files": [str(p) for p in result.files],
        "target_precision": result.target,
        "seed": result.seed,
        "min_flagged": result.min_flagged,
        "labelled_answers": len(result.rows),
        "unlabelled_skipped": result.unlabelled,
        "fit_answers": fit_rows,
        "held_out_answers": len(result.rows) - fit_rows,
        "hard_only_regimes": sorted(r for r, p in result.points.items() if p.hard_only),
        "regimes": {r: _point_json(p, result.base) for r, p in result.points.items()},
        "held_out": groups,
        "use": f"STREAMPROC_JUDGE__ANSWER_CALIBRATOR={result.name}",
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pair(before: float | None, after: float | None) -> str:
    return f"{_pct(before)} -> {_pct(after)}"


def _point_text(point: OperatingPoint | None, base: AnswerCalibrator) -> str:
    if point is None:
        return ""
    before = (
        "hard-only" if point.regime in base.hard_only else f"{base.parts[point.regime].threshold:g}"
    )
    after = "hard-only" if point.hard_only else f"{point.threshold:g}"
    return f"{before} -> {after}"


def render_refit(result: Refit) -> str:
    """The table: per regime the operating point, then held-out before -> after."""
    header = [
        "group",
        "task types",
        "operating point",
        "held-out",
        "precision",
        "recall",
        "flag share",
    ]
    body = [header]
    for report in result.reports:
        body.append(
            [
                report.group,
                ",".join(report.task_types) or "-",
                _point_text(report.point, result.base),
                f"{report.before.n} ({report.before.positives} halluc.)",
                _pair(report.before.precision, report.after.precision),
                _pair(report.before.recall, report.after.recall),
                _pair(report.before.flag_share, report.after.flag_share),
            ]
        )
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{r}: {p.note}" for r, p in result.points.items()]
    tail = [
        "",
        f"target precision {result.target:g}; {len(result.rows)} labelled answers "
        f"({result.unlabelled} unlabelled skipped), seed {result.seed}; before / after on the "
        "held-out half only.",
        *notes,
    ]
    if result.manifest is not None:
        tail.append(
            f"wrote {result.manifest} (use: STREAMPROC_JUDGE__ANSWER_CALIBRATOR={result.name})"
        )
    return "\n".join(lines + tail) + "\n"


def run_calibrate(
    args: argparse.Namespace,
    options: RefitOptions,
    *,
    build: Callable[[Any], Judge] = build_judge,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``calibrate --from-labels``; 0 on success, 2 when the input cannot be used."""
    out, err = out or sys.stdout, err or sys.stderr
    target = args.target_precision or options.target_precision
    if not 0 < target <= 1 or args.min_flagged < 1:
        print("streamproc calibrate: --target-precision in (0, 1], --min-flagged >= 1", file=err)
        return 2
    missing = [p for p in args.from_labels if not p.is_file()]
    if missing:
        print(f"streamproc calibrate: no such file: {', '.join(map(str, missing))}", file=err)
        return 2
    try:
        result, base_payload = refit(
            options,
            args.from_labels,
            target=target,
            seed=args.seed,
            min_flagged=args.min_flagged,
            batch_size=args.batch_size,
            build=build,
            progress=err,
        )
        models_dir = args.models_dir or options.judge.inference.models_dir
        result = write_calibrator(result, base_payload, models_dir, args.out_name)
    except (LoadError, ValueError, FileExistsError) as error:
        print(f"streamproc calibrate: {error}", file=err)
        return 2
    if args.json:
        print(json.dumps(refit_json(result), indent=2), file=out)
    else:
        print(render_refit(result), file=out, end="")
    return 0
