"""Judge labelled cases with the live engine, at the granularity their labels demand."""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.contracts.events import JudgeInfo
from streamproc.evaluate.cases import CaseResult, LabelledCase, person_verdicts
from streamproc.inference.judges import build_judge
from streamproc.inference.options import JudgeSettings
from streamproc.judge import Judge
from streamproc.judge.text.claims import Granularity

__all__ = ["judge_cases", "judge_cases_with"]

_BATCH = 32  # as a worker would batch; the checker sees one call per batch


def judge_cases(
    cases: Sequence[LabelledCase], settings: JudgeSettings
) -> tuple[list[CaseResult], list[JudgeInfo]]:
    """Results in input order, and the judge(s) used.

    Claim-verdict labels were made per sentence, so those cases are always judged at
    ``sentence`` granularity; the rest at ``settings.granularity``.
    """
    groups: dict[Granularity, list[int]] = {}
    for i, case in enumerate(cases):
        granularity: Granularity = "sentence" if case.sentence_labelled else settings.granularity
        groups.setdefault(granularity, []).append(i)
    results: dict[int, CaseResult] = {}
    infos = []
    for granularity, indices in groups.items():
        judge = build_judge(settings.model_copy(update={"granularity": granularity}))
        infos.append(judge.info)
        chosen = [cases[i] for i in indices]
        results.update(zip(indices, judge_cases_with(judge, chosen), strict=True))
    return [results[i] for i in range(len(cases))], infos


def judge_cases_with(judge: Judge, cases: Sequence[LabelledCase]) -> list[CaseResult]:
    """Results in input order from a judge already built (the caller picked its
    granularity), in worker-sized batches."""
    results: list[CaseResult] = []
    for at in range(0, len(cases), _BATCH):
        chunk = cases[at : at + _BATCH]
        for case, judgement in zip(chunk, judge.judge_batch([c.event for c in chunk]), strict=True):
            person, uncovered = person_verdicts(case, judgement)
            results.append(CaseResult(case, judgement, person, uncovered))
    return results
