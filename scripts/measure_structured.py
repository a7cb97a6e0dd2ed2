"""Measure the structured value checks on RAGTruth Data2txt rows of one split.

For every checked claim of every Data2txt answer: does ``StructuredEvidence.compare``
flag it (VALUE_MISMATCH or FIELD_NOT_IN_RECORD), and does the claim overlap a
human-labelled hallucinated span? Tune on ``--split calibrate`` only; quote ``report``.

    .venv/bin/python scripts/measure_structured.py --split calibrate [--show]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from streamproc.evaluate.loaders import benchmark_row_to_event
from streamproc.evaluate.splits import split_of
from streamproc.judge.records.structured import StructuredEvidence, ValueReason
from streamproc.judge.text.claims import decompose

DEFAULT_DATA = Path("/work/shared/data/ragtruth_dev.jsonl")
FLAGS = (ValueReason.VALUE_MISMATCH, ValueReason.FIELD_NOT_IN_RECORD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("calibrate", "report"), required=True)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show", action="store_true", help="print each flagged claim")
    args = parser.parse_args()

    counts: Counter[str] = Counter()
    for position, line in enumerate(args.data.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("task_type") != "Data2txt" or split_of(str(row["id"])) != args.split:
            continue
        event = benchmark_row_to_event(row, position)
        structured = StructuredEvidence.from_items(event.evidence)
        spans = [(s["start"], s["end"]) for s in row.get("labels") or []]
        counts["answers"] += 1
        for claim in decompose(event.answer, event.evidence, "atomic").claims:
            if not claim.checked:
                continue
            findings = structured.compare(claim.text)
            labelled = any(s < claim.end and claim.start < e for s, e in spans)
            flagged = [f for f in findings if f.reason in FLAGS]
            counts["claims"] += 1
            counts["labelled claims"] += labelled
            counts["confirmed claims"] += any(
                f.reason is ValueReason.VALUE_CONFIRMED for f in findings
            )
            for reason in FLAGS:
                if any(f.reason is reason for f in flagged):
                    counts[f"{reason.value} claims"] += 1
                    counts[f"{reason.value} claims on a labelled span"] += labelled
            if flagged:
                counts["flagged claims"] += 1
                counts["flagged claims on a labelled span"] += labelled
                counts["labelled claims flagged"] += labelled
            if args.show and (flagged or labelled):
                mark = "TP" if flagged and labelled else ("FP" if flagged else "FN")
                print(f"[{mark}] {row['id']}: {claim.text}")
                for finding in flagged:
                    print(f"       {finding.reason_text}")
    total, hits = counts["flagged claims"], counts["flagged claims on a labelled span"]
    n_labelled, caught = counts["labelled claims"], counts["labelled claims flagged"]
    print(f"split={args.split} answers={counts['answers']} claims={counts['claims']}")
    for reason in FLAGS:
        n = counts[f"{reason.value} claims"]
        on = counts[f"{reason.value} claims on a labelled span"]
        print(f"  {reason.value}: {n} claims, {on} on a labelled span")
    print(f"  VALUE_CONFIRMED: {counts['confirmed claims']} claims")
    precision = f"{hits / total:.2f}" if total else "n/a"
    recall = f"{caught / n_labelled:.2f}" if n_labelled else "n/a"
    print(f"  flagged claims: {total}, on a labelled span: {hits}, precision {precision}")
    print(f"  labelled claims: {n_labelled}, flagged: {caught}, recall {recall}")


if __name__ == "__main__":
    main()
