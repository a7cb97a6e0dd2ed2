"""Judge labelled cases with the live engine, at the granularity their labels demand."""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.config import JudgeSettings
from streamproc.evaluate.cases import CaseResult, LabelledCase, person_verdicts
from streamproc.events import JudgeInfo
from streamproc.judge import build_judge
from streamproc.judge.claims import Granularity

__all__ = ["judge_cases"]

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
        for at in range(0, len(indices), _BATCH):
            chunk = indices[at : at + _BATCH]
            judgements = judge.judge_batch([cases[i].event for i in chunk])
            for i, judgement in zip(chunk, judgements, strict=True):
                person, uncovered = person_verdicts(cases[i], judgement)
                results[i] = CaseResult(cases[i], judgement, person, uncovered)
    return [results[i] for i in range(len(cases))], infos
