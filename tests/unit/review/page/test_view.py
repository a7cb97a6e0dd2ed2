"""What the page shows of an item: claims cut out of the answer, the deciding sentence
of each claim marked in its evidence."""

from __future__ import annotations

from streamproc.contracts.events import EvidenceItem
from streamproc.contracts.reasons import Reason
from streamproc.review.page.view import Segment, deciding_sentence, item_view
from tests.unit.review.page.samples import EVIDENCE, review_item


def test_the_deciding_sentence_is_the_one_sharing_most_words_with_the_claim() -> None:
    text = "Opening hours vary. The Lyon store opens at 9 on Monday. Parking is free."
    span = deciding_sentence("The Lyon store opens at 10 on Monday.", text)
    assert span is not None and text[span[0] : span[1]] == "The Lyon store opens at 9 on Monday."
    assert deciding_sentence("Completely unrelated words here", text) is None
    assert deciding_sentence("the of and", text) is None


def test_the_answer_is_cut_into_its_claims_coloured_by_verdict() -> None:
    item = review_item("a1")
    view = item_view(item, show_judge=True)
    assert "".join(s.text for s in view.answer_segments) == item.answer
    coloured = [(s.claims, s.verdict) for s in view.answer_segments if s.claims]
    assert coloured == [((1,), "contradicted"), ((2,), "unsupported")]
    assert [c.verdict for c in view.claims] == ["contradicted", "unsupported"]
    assert view.flagged and view.action == "withhold"


def test_evidence_keeps_its_text_and_marks_what_decided_each_claim() -> None:
    view = item_view(review_item("a1"), show_judge=True)
    [evidence] = view.evidence
    assert "".join(s.text for s in evidence.segments) == EVIDENCE
    assert evidence.decided == [1, 2]
    marked = [s for s in evidence.segments if s.claims]
    assert marked == [
        Segment("The order 7 was shipped on 5 May from the Lyon warehouse.", (1,), "contradicted")
    ]


def test_evidence_no_claim_names_is_shown_unmarked_with_its_fields() -> None:
    item = review_item(
        "a2",
        answer="The order 7 was shipped on 5 May [D1].",
        evidence=(
            EvidenceItem(id="D1", text=EVIDENCE),
            EvidenceItem(id="R9", text="order record", kind="record", fields={"order": 7}),
        ),
    )
    # Only D1 decided the claim.
    claims = [c.model_copy(update={"evidence_ids": ["D1"]}) for c in item.judgement.claims]
    item = item.model_copy(
        update={"judgement": item.judgement.model_copy(update={"claims": claims})}
    )
    record = item_view(item).evidence[1]
    assert record.decided == [] and record.segments == [Segment("order record")]
    assert record.fields_json is not None and '"order": 7' in record.fields_json


def test_by_default_the_view_carries_no_verdict_score_or_reason() -> None:
    """Without show_judge the data itself has no verdict, so no template can leak it."""
    item = review_item("a1")
    view = item_view(item)
    assert not view.show_judge
    assert [(s.claims, s.verdict, s.colour) for s in view.answer_segments if s.claims] == [
        ((1,), None, "plain"),
        ((2,), None, "plain"),
    ]
    assert [(c.verdict, c.score, c.reasons, c.colour) for c in view.claims] == [
        (None, None, [], "plain"),
        (None, None, [], "plain"),
    ]
    marked = [s for s in view.evidence[0].segments if s.claims]
    assert [(s.claims, s.verdict) for s in marked] == [((1,), None)]
    # The deciding sentence is still marked, so the reviewer finds the evidence quickly.
    assert marked[0].text == "The order 7 was shipped on 5 May from the Lyon warehouse."


def test_shown_reasons_are_plain_phrases_not_the_judges_internals() -> None:
    item = review_item("a1")
    first, *rest = item.judgement.claims
    calibrated = first.model_copy(
        update={
            "reasons": [
                Reason.from_text(text)
                for text in [
                    "CALIBRATED_RISK: 0.96 >= 0.45 (unknown_numbers +4.87, entail_logit_max -1.20)",
                    "NUMBER_MISMATCH: 3 May not in the evidence",
                    "NUMBER_MISMATCH: 7 not in the evidence",
                    "LIMIT_CLAIMS: 3 of 9 claims to check left unchecked",
                    "SOME_FUTURE_CODE: p=0.12",
                ]
            ]
        }
    )
    item = item.model_copy(
        update={"judgement": item.judgement.model_copy(update={"claims": [calibrated, *rest]})}
    )
    claim = item_view(item, show_judge=True).claims[0]
    assert claim.reasons == [
        "weighed from several signals together",
        "a number differs from the evidence",
        "not checked in full: over a size limit",
        "another check of the judge",
    ]
    assert not any(ch.isdigit() for reason in claim.reasons for ch in reason)
