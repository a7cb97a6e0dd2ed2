"""What the streaming gate's records say: per level, each sentence's release delay and
each stream's final, the same answers through ``/v1/check`` beside them, the targets,
and the markdown. Arithmetic on records only, so it is tested without a gate."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bench._gate_load import Sample
from bench._gate_report import fmt, pct
from bench._gate_summary import SHED_REASON, summarise_level, summarise_ms
from bench._stream_gate_client import StreamPlan, StreamRecord

__all__ = [
    "FIRST_SENTENCE_GAIN_S",
    "QA_RELEASE_P95_MS",
    "compare",
    "render",
    "summarise_checks",
    "summarise_streams",
    "targets",
]

QA_RELEASE_P95_MS = 150.0
FIRST_SENTENCE_GAIN_S = 1.0


def _first_sentence_s(record: StreamRecord) -> float | None:
    """From the stream's scheduled start to its first checked sentence's message."""
    first = next((m for m in record.messages if m.type == "sentence"), None)
    return None if first is None else first.at - record.due


def summarise_streams(
    records: Sequence[StreamRecord], budget_ms: float, seconds: float
) -> dict[str, Any]:
    """A stream level's numbers. Sentence shares are of every sentence the answers hold
    (a sentence whose message never came counts against them); stream shares of every
    stream started."""
    from_last, from_completing, gate_ms, end_to_final, slips, connect = [], [], [], [], [], []
    planned = within = verified = held = gate_within = 0
    shed = shed_sentences = withdrawn = 0
    for record in records:
        plan, sent = record.plan, record.sent
        planned += len(plan.completes)
        for m in record.messages:
            if m.type != "sentence" or m.index is None or m.index >= len(plan.completes):
                continue
            done, last = plan.completes[m.index], plan.last_char[m.index]
            if done < len(sent):
                from_completing.append((m.at - sent[done]) * 1000)
                from_last.append((m.at - sent[last]) * 1000)
                within += from_completing[-1] <= budget_ms
            gate_ms.append(m.gate_latency_ms or 0.0)
            gate_within += (m.gate_latency_ms or 0.0) <= budget_ms
            verified += bool(m.verified)
            held += m.decision == "hold"
            shed_sentences += m.reason == SHED_REASON
        final = next((m for m in record.messages if m.type == "final"), None)
        if final is not None and len(sent) > len(plan.tokens):
            end_to_final.append((final.at - sent[-1]) * 1000)
            withdrawn += final.withdrawn
        # Shed as /v1/check counts it: the answer's decision (the final) was OVERLOADED.
        shed += record.failure == "refused: busy" or (
            final is not None and not final.verified and final.reason == SHED_REASON
        )
        if record.opened is not None:
            connect.append((record.opened - record.due) * 1000)
            slips += [
                (at - record.opened - k / plan.tokens_per_s) * 1000
                for k, at in enumerate(sent[: len(plan.tokens)])  # the deltas, not the end
            ]
    finals = [m for r in records for m in r.messages if m.type == "final"]
    firsts = [s for s in map(_first_sentence_s, records) if s is not None]
    started = len(records)
    return {
        "streams": started,
        "offered_rate": started / seconds if seconds > 0 else None,
        "tokens_per_stream": statistics.fmean(len(r.plan.tokens) for r in records)
        if records
        else None,
        "sentences": planned,
        "sentence_messages": len(gate_ms),
        "release_from_last_char_ms": summarise_ms(from_last),
        "release_from_completing_delta_ms": summarise_ms(from_completing),
        "sentence_gate_latency_ms": summarise_ms(gate_ms),
        "end_to_final_ms": summarise_ms(end_to_final),
        "first_sentence_s": summarise_ms(firsts),
        "sentences_within_budget": within / planned if planned else None,
        "sentences_within_budget_gate_clock": gate_within / planned if planned else None,
        "sentences_verified": verified / planned if planned else None,
        "sentences_held": held / planned if planned else None,
        "finals": len(finals),
        "finals_verified": sum(bool(m.verified) for m in finals) / started if started else None,
        "final_decisions": dict(Counter(str(m.decision) for m in finals)),
        "withdrawn_sentences": withdrawn,
        "streams_shed": shed / started if started else None,
        "streams_shed_count": shed,
        "sentences_shed": shed_sentences / planned if planned else None,
        "failures": dict(Counter((r.failure or "").split(":")[0] for r in records if r.failure)),
        "connect_ms": summarise_ms(connect),
        "send_slip_ms": summarise_ms(slips),
    }


def summarise_checks(
    samples: Sequence[Sample], plans: Sequence[StreamPlan], budget_ms: float, seconds: float
) -> dict[str, Any]:
    """The ``/v1/check`` level as ``bench gate`` summarises one (latency from the send,
    i.e. the stream's end), plus each reply's time from its stream's start."""
    by_index = {p.index: p for p in plans}
    from_start = {
        s.pool_index: s.done - s.due + by_index[s.pool_index].writing_s
        for s in samples
        if s.pool_index is not None and s.reply.error is None
    }
    level = summarise_level(samples, budget_ms, seconds)
    level.pop("latency_by_pool_index", None)
    return {
        **level,
        "reply_from_start_s": summarise_ms(list(from_start.values())),
        "reply_from_start_by_stream": {str(k): v for k, v in from_start.items()},
    }


def compare(records: Sequence[StreamRecord], checks: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first checked sentence, stream against ``/v1/check``, on the answers both
    got: medians from the stream's start and the median of per-answer differences
    (``/v1/check`` minus stream: positive, the stream showed it sooner)."""
    replies: Mapping[str, float] = checks.get("reply_from_start_by_stream", {})
    pairs = []
    for record in records:
        first, reply = _first_sentence_s(record), replies.get(str(record.plan.index))
        if first is not None and reply is not None:
            pairs.append((first, reply))
    if not pairs:
        return None
    return {
        "answers": len(pairs),
        "stream_median_s": statistics.median(f for f, _ in pairs),
        "check_median_s": statistics.median(r for _, r in pairs),
        "median_gain_s": statistics.median(r - f for f, r in pairs),
    }


def targets(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The streaming gate's targets; ``passed`` None when the level needed was not run."""
    out: list[dict[str, Any]] = []
    for run in runs:
        for level in run["levels"]:
            load, kind = level["load_pct"], run["kind"]
            if kind == "qa" and load == 50:
                p95 = (level["streams"]["release_from_last_char_ms"] or {}).get("p95")
                out.append(
                    {
                        "target": "qa, 50 % load: p95 release delay of a sentence "
                        "(from its last character's send)",
                        "value": p95,
                        "limit": QA_RELEASE_P95_MS,
                        "unit": "ms",
                        "passed": None if p95 is None else p95 <= QA_RELEASE_P95_MS,
                    }
                )
            if kind == "ragtruth":
                gain = (level.get("compare") or {}).get("median_gain_s")
                out.append(
                    {
                        "target": f"ragtruth, {load:g} % load: first checked sentence sooner "
                        "than /v1/check's reply (median per answer)",
                        "value": gain,
                        "limit": FIRST_SENTENCE_GAIN_S,
                        "unit": "s",
                        "passed": None if gain is None else gain >= FIRST_SENTENCE_GAIN_S,
                    }
                )
    return out


def _p(summary: Mapping[str, Any] | None, digits: int = 0) -> list[str]:
    got = summary or {}
    return [fmt(got.get(k), digits) for k in ("p50", "p95", "p99")]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render(report: Mapping[str, Any]) -> str:
    """Markdown: streams per level, the comparison with /v1/check, open streams, targets."""
    machine = report["machine"]
    lines = [
        f"Streaming gate benchmark, judge `{report['judge']}`; machine {machine['nproc']} "
        f"CPUs ({machine['cpu_model']}), Python {machine['python']}; budget "
        f"{report['budget_ms']:g} ms, {report['tokens_per_s'][0]:g}-"
        f"{report['tokens_per_s'][1]:g} tokens/s (a token: a word and its following space).",
        "",
    ]
    stream_rows, check_rows = [], []
    for run in report["runs"]:
        for lv in run["levels"]:
            st, ck, cmp_ = lv["streams"], lv["checks"], lv.get("compare") or {}
            head = [run["kind"], f"{lv['load_pct']:g} %", fmt(lv["target_rate"], 2)]
            stream_rows.append(
                [
                    *head,
                    str(st["streams"]),
                    str(st["sentences"]),
                    *_p(st["release_from_last_char_ms"]),
                    *_p(st["release_from_completing_delta_ms"]),
                    *_p(st["end_to_final_ms"]),
                    pct(st["sentences_within_budget"]),
                    pct(st["sentences_verified"]),
                    f"{st['streams_shed_count']} ({pct(st['streams_shed'])})",
                    pct(st["sentences_shed"]),
                    str(sum(st["failures"].values())),
                    fmt(lv["stream_gate_peak_rss_mib"], 0),
                ]
            )
            check_rows.append(
                [
                    *head,
                    fmt(cmp_.get("stream_median_s"), 2),
                    fmt(cmp_.get("check_median_s"), 2),
                    fmt(cmp_.get("median_gain_s"), 2),
                    *_p(ck["latency_ms"]),
                    pct(ck["within_budget"]),
                    pct(ck["verified"]),
                    pct(ck["shed"]),
                    str(ck["unanswered"]),
                    fmt(lv["check_gate_peak_rss_mib"], 0),
                ]
            )
    if stream_rows:
        lines += _table(
            [
                "answers", "load", "streams/s", "streams", "sentences",
                "release p50 ms", "p95", "p99", "from completing delta p50", "p95", "p99",
                "end to final p50", "p95", "p99", "within budget", "verified",
                "shed streams", "shed sentences", "failed", "peak RSS MiB",
            ],
            stream_rows,
        )  # fmt: skip
        lines += ["", "First checked sentence, seconds from the stream's start (same answers):", ""]
        lines += _table(
            [
                "answers", "load", "answers/s", "stream median s", "/v1/check median s",
                "median gain s", "/v1/check p50 ms", "p95", "p99", "within budget",
                "verified", "shed", "unanswered", "peak RSS MiB",
            ],
            check_rows,
        )  # fmt: skip
    if report["runs"]:
        lines += ["", "Capacity (closed loop on /v1/check, verified answers/s):"]
    for run in report["runs"]:
        lines.append(
            f"- {run['kind']}: {fmt(run['capacity']['answers_per_s'], 2)} (stream gate), "
            f"{fmt((run.get('check_capacity') or {}).get('answers_per_s'), 2)} (check gate); "
            f"{run['repeated_answers']} repeated answers of a pool of {run['pool']}"
        )
    if report.get("open_streams"):
        lines += ["", "Streams open at once (gate RSS, sampled every 0.25 s):"]
    for each in report.get("open_streams", []):
        st = each["streams"]
        lines.append(
            f"- {each['streams_opened']} streams, {each['kind']} at {each['tokens_per_s']:g} "
            f"tokens/s, at most {each['max_open']} open together: gate RSS idle "
            f"{fmt(each['idle_rss_mib'], 0)} MiB, peak {fmt(each['peak_rss_mib'], 0)} MiB "
            f"(+{fmt(each['added_mib_per_stream'], 2)} MiB per open stream); release p95 "
            f"{fmt((st['release_from_completing_delta_ms'] or {}).get('p95'), 0)} ms from "
            f"the completing delta; shed {st['streams_shed_count']}, failed "
            f"{sum(st['failures'].values())}"
        )
    lines += ["", "Targets:"] if report.get("targets") else []
    for each in report.get("targets", []):
        verdict = {True: "MET", False: "MISSED", None: "n/a"}[each["passed"]]
        unit = each["unit"]
        sign = ">=" if unit == "s" else "<="
        lines.append(
            f"- {verdict}: {each['target']}: {fmt(each['value'], 2 if unit == 's' else 0)} "
            f"{unit} (target {sign} {each['limit']:g} {unit})"
        )
    return "\n".join(lines) + "\n"
