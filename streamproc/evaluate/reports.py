"""Render ``check``, ``agree`` and ``score`` as terminal text and as markdown.

The text keeps the course lab's layout, so its published numbers can be compared line
by line; the markdown is for a portfolio or a pull request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import ClaimVerdict, JudgeInfo, Outcome, VerdictLabel
from streamproc.evaluate.cases import CaseResult
from streamproc.evaluate.metrics import VERDICTS, Agreement, Scores

__all__ = ["Rendered", "render_agree", "render_check", "render_score"]


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    markdown: str


def _judge(infos: Sequence[JudgeInfo]) -> str:
    """ "rules v1, sentence claims, coverage 0.75" (several when granularities differ)."""
    parts = []
    for info in infos:
        limits = ", ".join(f"{k} {v:g}" for k, v in sorted(info.thresholds.items()))
        parts.append(
            f"{info.name} v{info.version}, {info.granularity} claims"
            + (f", {limits}" if limits else "")
        )
    return "; ".join(parts)


def _ratio(hits: int, total: int) -> str:
    return f"{hits}/{total} = {hits / total:.0%}" if total else f"{hits}/{total} (n/a)"


def _percent(hits: int, total: int) -> str:
    return f"{hits / total:.0%}" if total else "n/a"


def _cite(claim: ClaimVerdict) -> str:
    return {True: "ok ", False: "BAD", None: "-- "}[claim.citation_supported]


# ----------------------------------------------------------------------------------- check


def render_check(results: Sequence[CaseResult], infos: Sequence[JudgeInfo]) -> Rendered:
    """Every claim's verdict, its citation, and where the person disagrees."""
    lines = [f"Judge: {_judge(infos)}", ""]
    rows = [
        "| Case | Claim | Judge | Person | Citation | Text |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        event, judgement = r.case.event, r.judgement
        lines.append(f"{r.case.case_id}  {event.question or '(no question)'}")
        if judgement.abstained:
            lines.append("      (abstains: says it can't find the answer)")
        if not judgement.verified and judgement.unverified_reason is not None:
            lines.append(f"      (not verified: {judgement.unverified_reason.value})")
        for claim, person in zip(judgement.claims, r.person, strict=True):
            text = claim.text.replace("\n", " ")
            if claim.verdict is None:
                lines.append(f"      {'not checked':<13} ({claim.claim_class.value})  {text[:60]}")
                continue
            if claim.verdict is VerdictLabel.UNVERIFIED:
                # not a verdict: no disagreement with the person to show
                lines.append(f"      {'unverified':<13} {'':<13}  {text[:60]}")
                rows.append(
                    f"| {r.case.case_id} | {claim.index} | unverified | "
                    f"{person.value if person else ''} | | {text.replace('|', '/')} |"
                )
                continue
            flag = "" if person in (None, claim.verdict) else f"   <- person said {person.value}"
            cites = ",".join(claim.citations) or "no citation"
            lines.append(
                f"      {claim.verdict.value:<13} cite {_cite(claim)} [{cites}]  {text[:60]}{flag}"
            )
            rows.append(
                f"| {r.case.case_id} | {claim.index} | {claim.verdict.value} | "
                f"{person.value if person else ''} | {_cite(claim).strip()} [{cites}] | "
                f"{text.replace('|', '/')} |"
            )
        lines.append(
            f"      outcome: {judgement.outcome.value}, action: {judgement.action.value}\n"
        )
    markdown = ["# Claim verdicts", "", f"Judge: {_judge(infos)}.", "", *rows, ""]
    return Rendered("\n".join(lines), "\n".join(markdown))


# ----------------------------------------------------------------------------------- agree


def render_agree(agreement: Agreement, infos: Sequence[JudgeInfo]) -> Rendered:
    """Confusion matrix person x judge, exact agreement, caught, false alarms."""
    a = agreement
    header = f"Judge '{_judge(infos)}' against the person's labels, {a.claims} claims"
    matrix = ["person \\ judge  " + "".join(f"{v.value:>14}" for v in VERDICTS)]
    table = ["| person \\ judge | " + " | ".join(v.value for v in VERDICTS) + " |"]
    table.append("| --- " * (len(VERDICTS) + 1) + "|")
    for p in VERDICTS:
        counts = [a.matrix[(p, v)] for v in VERDICTS]
        matrix.append(f"{p.value:<15} " + "".join(f"{n:>14}" for n in counts))
        table.append(f"| {p.value} | " + " | ".join(str(n) for n in counts) + " |")
    findings = [
        f"Exact agreement: {a.agreed}/{a.claims} = {_percent(a.agreed, a.claims)}",
        f"Hallucinated claims caught: {a.caught}/{a.bad}  (a missed one reaches the user)",
        f"False alarms on good claims: {a.false_alarms}/{a.good}"
        "  (each one costs a reviewer's time)",
    ]
    if a.answers_bad + a.answers_good:
        findings += [
            f"Hallucinated answers caught: {a.answers_caught}/{a.answers_bad}",
            f"False alarms on faithful answers: {a.answers_false_alarms}/{a.answers_good}",
        ]
    if a.unverified or a.unverified_answers:
        findings.append(
            f"Not verified (left out above): {a.unverified} labelled claims in "
            f"{a.unverified_answers} answers (e.g. a language the judge was not measured on)"
        )
    if a.uncovered_spans:
        findings.append(
            f"Labelled spans outside every checked claim: {a.uncovered_spans} "
            "(in lines the judge does not check)"
        )
    text = [header, "", *matrix, "", *findings]
    markdown = [
        "# Judge against people",
        "",
        header + ".",
        "",
        *table,
        "",
        *(f"- {f}" for f in findings),
        "",
    ]
    return Rendered("\n".join(text), "\n".join(markdown))


# ----------------------------------------------------------------------------------- score


def _score_rows(s: Scores) -> list[tuple[str, str]]:
    if s.interval is None:
        rate = f"{s.hallucinated}/{s.answered} (n/a)"
    else:
        low, high = s.interval
        rate = f"{_ratio(s.hallucinated, s.answered)}, 95% interval {low:.0%} to {high:.0%}"
    rows = [
        ("Claims supported by the evidence (faithfulness)", _ratio(s.supported, s.claims)),
        ("  of the rest: contradicted / unsupported", f"{s.contradicted} / {s.unsupported}"),
        ("Answers with at least one unsupported claim (hallucination rate)", rate),
    ]
    if s.unverified or s.unverified_claims:
        rows.append(
            (
                "  answers / claims not verified (outside the above)",
                f"{s.unverified} / {s.unverified_claims}",
            )
        )
    if s.person_known:
        rows.append(
            ("  the same, by the person's labels", f"{s.person_hallucinated}/{s.person_known}")
        )
    rows += [
        (
            "Supported claims whose citations back them (citation recall)",
            _percent(s.recall_hits, s.recall_total),
        ),
        (
            "Citations that pull their weight (citation precision)",
            _ratio(s.needed_citations, s.citations),
        ),
        (
            "Unanswerable questions where it said it can't find it",
            f"{s.right_abstentions}/{s.unanswerable}",
        ),
        ("Answerable questions where it wrongly gave up", f"{s.false_abstentions}/{s.answerable}"),
    ]
    if s.answerable_unknown:
        rows.append(
            ("  cases whose answerability is unknown (left out above)", str(s.answerable_unknown))
        )
    return rows


def render_score(s: Scores, infos: Sequence[JudgeInfo]) -> Rendered:
    """The course's score report, plus the risk-weighted score with ``s.penalty``."""
    rows = _score_rows(s)
    width = max(len(name) for name, _ in rows)
    correct, abstained, wrong, unverified = (
        s.outcomes[o]
        for o in (Outcome.CORRECT, Outcome.ABSTAINED, Outcome.WRONG, Outcome.UNVERIFIED)
    )
    outcomes = (
        f"Outcomes: correct {correct}, abstained {abstained}, wrong {wrong}, "
        f"unverified {unverified}"
    )
    risk = f"{s.risk_weighted:+g}"
    text = [f"{s.cases} cases, {s.claims} claims, judge '{_judge(infos)}'", ""]
    text += [f"{name:<{width}}  {value}" for name, value in rows]
    text += [
        "",
        outcomes,
        f"Accuracy-only score (wrong costs 0): {correct}/{s.cases}",
        f"Risk-weighted score (correct +1, abstain 0, wrong -{s.penalty:g}): {risk}",
    ]
    markdown = [
        "# Groundedness report",
        "",
        f"{s.cases} test cases, {s.claims} claims, judge `{_judge(infos)}`.",
        "",
        "| Measure | Result |",
        "| --- | --- |",
        *(f"| {name.strip()} | {value} |" for name, value in rows),
        "",
        f"{outcomes}. Accuracy-only score: {correct}/{s.cases}. "
        f"Risk-weighted score with penalty {s.penalty:g}: {risk}.",
        "",
    ]
    return Rendered("\n".join(text), "\n".join(markdown))
