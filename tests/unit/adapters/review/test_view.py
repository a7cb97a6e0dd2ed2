"""What the page shows of an item: claims cut out of the answer, the deciding sentence
of each claim marked in its evidence."""

from __future__ import annotations

from streamproc.adapters.review.view import Segment, deciding_sentence, item_view
from streamproc.events import EvidenceItem
from tests.unit.adapters.review.samples import EVIDENCE, review_item


def test_the_deciding_sentence_is_the_one_sharing_most_words_with_the_claim() -> None:
    text = "Opening hours vary. The Lyon store opens at 9 on Monday. Parking is free."
    span = deciding_sentence("The Lyon store opens at 10 on Monday.", text)
    assert span is not None and text[span[0] : span[1]] == "The Lyon store opens at 9 on Monday."
    assert deciding_sentence("Completely unrelated words here", text) is None
    assert deciding_sentence("the of and", text) is None


def test_the_answer_is_cut_into_its_claims_coloured_by_verdict() -> None:
    item = review_item("a1")
    view = item_view(item)
    assert "".join(s.text for s in view.answer_segments) == item.answer
    coloured = [(s.claims, s.verdict) for s in view.answer_segments if s.claims]
    assert coloured == [((1,), "contradicted"), ((2,), "unsupported")]
    assert [c.verdict for c in view.claims] == ["contradicted", "unsupported"]
    assert view.flagged and view.action == "withhold"


def test_evidence_keeps_its_text_and_marks_what_decided_each_claim() -> None:
    view = item_view(review_item("a1"))
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
