"""The review page over HTTP (aiohttp's test server; a recording publisher instead of
Kafka): who gets in, who sees what, and which label event a submitted form becomes."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from streamproc.contracts.events import EvidenceItem
from streamproc.contracts.label_events import ClaimLabel, ClaimLabelValue, LabelEvent
from streamproc.review.page.auth import Reviewers, new_token, token_stanza
from streamproc.review.page.queue_store import ReviewQueueStore
from streamproc.review.page.server import COOKIE, build_app
from streamproc.review.page.sessions import SessionBook
from tests.unit.review.page.samples import review_item

NOW = datetime(2026, 1, 3, 12, 0, tzinfo=UTC)
ALICE = new_token()
GINA = new_token()


@dataclass
class RecordingPublisher:
    events: list[LabelEvent] = field(default_factory=list)
    fail: bool = False
    delay_s: float = 0.0

    async def __call__(self, event: LabelEvent) -> None:
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ConnectionError("broker down")
        self.events.append(event)


@dataclass
class Page:
    client: TestClient  # type: ignore[type-arg]
    store: ReviewQueueStore
    published: RecordingPublisher


@pytest.fixture()
def reviewers(tmp_path: Path) -> Reviewers:
    path = tmp_path / "tokens.toml"
    path.write_text(token_stanza("alice", ["acme"], ALICE) + token_stanza("gina", ["globex"], GINA))
    return Reviewers.load(path)


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[ReviewQueueStore]:
    with ReviewQueueStore(f"sqlite:///{tmp_path / 'review.db'}") as store:
        store.add([review_item("a1", minutes=1), review_item("a2", minutes=2)])
        store.add([review_item("g1", tenant="globex")])
        yield store


async def _page(store: ReviewQueueStore, reviewers: Reviewers | None) -> AsyncIterator[Page]:
    published = RecordingPublisher()
    app = build_app(store=store, reviewers=reviewers, publish=published, now=lambda: NOW)
    async with TestClient(TestServer(app)) as client:
        yield Page(client, store, published)


@pytest.fixture()
async def page(store: ReviewQueueStore, reviewers: Reviewers) -> AsyncIterator[Page]:
    async for built in _page(store, reviewers):
        yield built


async def sign_in(page: Page, token: str = ALICE) -> str:
    """Sign in through the form; returns the CSRF token of the page shown next."""
    response = await page.client.post("/login", data={"token": token}, allow_redirects=False)
    assert response.status == 303, await response.text()
    html = await (await page.client.get("/")).text()
    return csrf_of(html)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


# --- who gets in ----------------------------------------------------------------------


async def test_without_a_token_a_browser_is_sent_to_sign_in_and_a_program_gets_401(
    page: Page,
) -> None:
    home = await page.client.get("/", allow_redirects=False)
    assert home.status == 303 and home.headers["Location"] == "/login"
    posted = await page.client.post("/items/a1/labels", data={"answer": "faithful"})
    assert posted.status == 401
    wrong = await page.client.get("/", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401 and "Bearer" in wrong.headers["WWW-Authenticate"]
    login = await page.client.get("/login")
    assert login.status == 200 and 'name="token"' in await login.text()
    assert page.published.events == []


async def test_a_wrong_token_does_not_sign_in(page: Page) -> None:
    response = await page.client.post("/login", data={"token": "guess"}, allow_redirects=False)
    assert response.status == 401
    assert "not known" in await response.text()
    assert COOKIE not in {c.key for c in page.client.session.cookie_jar}
    assert (await page.client.get("/", allow_redirects=False)).status == 303


async def test_signing_in_sets_a_strict_httponly_session_cookie_without_the_token(
    page: Page,
) -> None:
    response = await page.client.post("/login", data={"token": ALICE}, allow_redirects=False)
    assert response.status == 303
    cookie = response.cookies[COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert ALICE not in cookie.value
    home = await page.client.get("/")
    html = await home.text()
    assert home.status == 200 and 'id="answer-id">a1<' in html and ">alice<" in html


async def test_a_tampered_session_cookie_is_refused(page: Page) -> None:
    await sign_in(page)
    cookie = next(c for c in page.client.session.cookie_jar if c.key == COOKIE)
    name, issued, sid, csrf, signature = cookie.value.split(".")
    forged = f"{name}.{issued}.{sid}.{csrf}.{'0' * len(signature)}"
    page.client.session.cookie_jar.clear()
    page.client.session.cookie_jar.update_cookies({COOKIE: forged})
    assert (await page.client.get("/", allow_redirects=False)).status == 303


async def test_without_a_tokens_file_everyone_is_refused(store: ReviewQueueStore) -> None:
    async for page in _page(store, None):
        login = await page.client.get("/login")
        assert "No tokens file" in await login.text()
        refused = await page.client.post("/login", data={"token": ALICE}, allow_redirects=False)
        assert refused.status == 401
        bearer = await page.client.get("/", headers={"Authorization": f"Bearer {ALICE}"})
        assert bearer.status == 401


async def test_healthz_answers_without_signing_in(page: Page) -> None:
    response = await page.client.get("/healthz")
    assert response.status == 200 and (await response.json())["reviewers"] == 2


# --- who sees what --------------------------------------------------------------------


async def test_another_tenants_item_answers_404_like_an_unknown_one(page: Page) -> None:
    await sign_in(page)
    other = await page.client.get("/items/g1")
    unknown = await page.client.get("/items/no-such-answer")
    assert other.status == unknown.status == 404
    assert await other.text() == await unknown.text()
    own = await page.client.get("/items/a2")
    assert own.status == 200 and 'id="answer-id">a2<' in await own.text()
    labelled = await page.client.post(
        "/items/g1/labels", data={"csrf": csrf_of(await own.text()), "answer": "faithful"}
    )
    assert labelled.status == 404 and page.published.events == []


async def test_a_bearer_token_sees_its_own_tenant_only(page: Page) -> None:
    headers = {"Authorization": f"Bearer {GINA}"}
    home = await page.client.get("/", headers=headers)
    assert 'id="answer-id">g1<' in await home.text()
    assert (await page.client.get("/items/a1", headers=headers)).status == 404


# --- labelling ------------------------------------------------------------------------


async def test_a_submitted_form_becomes_the_reviewers_label_event(page: Page) -> None:
    csrf = await sign_in(page)
    response = await page.client.post(
        "/items/a1/labels",
        data={
            "csrf": csrf,
            "claim-0": "contradicted",
            "claim-1": "cant_tell",
            "answer": "hallucinated",
            "note": "  shipped on 5 May, not 3  ",
        },
        allow_redirects=False,
    )
    assert response.status == 303 and response.headers["Location"] == "/"
    [event] = page.published.events
    assert event.answer_id == "a1" and event.tenant == "acme" and event.reviewer == "alice"
    assert event.answer_label == "hallucinated"
    assert event.claims == [
        ClaimLabel(index=0, label=ClaimLabelValue.CONTRADICTED),
        ClaimLabel(index=1, label=ClaimLabelValue.CANT_TELL),
    ]
    assert event.note == "shipped on 5 May, not 3"
    assert event.source == "review-page" and event.labelled_at == NOW
    assert uuid.UUID(event.label_id).version == 5  # derived from the form token
    assert page.store.has_labelled("a1", "alice")
    # The next page is the next item.
    assert 'id="answer-id">a2<' in await (await page.client.get("/")).text()


async def test_unselected_claims_are_not_labelled_and_cant_tell_is_no_answer_label(
    page: Page,
) -> None:
    csrf = await sign_in(page)
    await page.client.post("/items/a1/labels", data={"csrf": csrf, "answer": "cant_tell"})
    [event] = page.published.events
    assert event.answer_label is None and event.claims == [] and event.note is None


async def test_a_form_without_the_answer_label_is_shown_again_and_nothing_is_sent(
    page: Page,
) -> None:
    csrf = await sign_in(page)
    response = await page.client.post(
        "/items/a1/labels", data={"csrf": csrf, "claim-0": "supported"}
    )
    assert response.status == 400 and "Choose the answer" in await response.text()
    bad_claim = await page.client.post(
        "/items/a1/labels", data={"csrf": csrf, "answer": "faithful", "claim-0": "maybe"}
    )
    assert bad_claim.status == 400
    assert page.published.events == [] and not page.store.has_labelled("a1", "alice")


async def test_a_form_without_its_csrf_token_is_refused(page: Page) -> None:
    await sign_in(page)
    missing = await page.client.post("/items/a1/labels", data={"answer": "faithful"})
    wrong = await page.client.post("/items/a1/labels", data={"answer": "faithful", "csrf": "x"})
    assert missing.status == wrong.status == 403
    assert page.published.events == []


async def test_a_post_from_another_origin_is_refused(page: Page) -> None:
    csrf = await sign_in(page)
    response = await page.client.post(
        "/items/a1/labels",
        data={"csrf": csrf, "answer": "faithful"},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status == 403 and page.published.events == []


async def test_a_label_the_broker_did_not_take_is_not_recorded(page: Page) -> None:
    csrf = await sign_in(page)
    page.published.fail = True
    response = await page.client.post("/items/a1/labels", data={"csrf": csrf, "answer": "faithful"})
    assert response.status == 502 and "could not be published" in await response.text()
    assert not page.store.has_labelled("a1", "alice")
    page.published.fail = False
    again = await page.client.post(
        "/items/a1/labels", data={"csrf": csrf, "answer": "faithful"}, allow_redirects=False
    )
    assert again.status == 303 and len(page.published.events) == 1


async def test_an_answer_is_labelled_once_per_reviewer(page: Page) -> None:
    csrf = await sign_in(page)
    data = {"csrf": csrf, "answer": "faithful"}
    assert (
        await page.client.post("/items/a1/labels", data=data, allow_redirects=False)
    ).status == 303
    second = await page.client.post("/items/a1/labels", data=data)
    assert second.status == 409 and len(page.published.events) == 1
    shown = await page.client.get("/items/a1")
    assert "labelled this answer already" in await shown.text()


async def test_skip_moves_to_the_next_item(page: Page) -> None:
    csrf = await sign_in(page)
    response = await page.client.post("/items/a1/skip", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303
    assert 'id="answer-id">a2<' in await (await page.client.get("/")).text()
    assert page.published.events == []


async def test_an_empty_queue_says_so(page: Page) -> None:
    csrf = await sign_in(page, GINA)
    await page.client.post("/items/g1/labels", data={"csrf": csrf, "answer": "faithful"})
    html = await (await page.client.get("/")).text()
    assert 'id="queue-empty"' in html and "0 waiting" in html


# --- what the page shows --------------------------------------------------------------

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


async def test_hostile_evidence_question_and_answer_are_shown_as_text(
    store: ReviewQueueStore, reviewers: Reviewers
) -> None:
    store.add(
        [
            review_item(
                "a0-hostile",
                minutes=-5,
                question=f"Shipped? {HOSTILE}",
                answer=f"The order 7 was shipped on 5 May {HOSTILE} [D1].",
                evidence=(
                    EvidenceItem(id='D1"><b>', text=f"The order 7 was shipped on 5 May. {HOSTILE}"),
                ),
            )
        ]
    )
    async for page in _page(store, reviewers):
        await sign_in(page)
        response = await page.client.get("/items/a0-hostile")
        html = await response.text()
        assert response.status == 200
        assert "<img src=x" not in html and '<script>alert("x")' not in html
        assert 'D1"><b>' not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
        # The one script is the page's own, allowed by the policy's nonce only.
        nonces = re.findall(r"<script nonce=\"([^\"]+)\">", html)
        assert len(nonces) == 1 and html.count("<script") == 1
        policy = response.headers["Content-Security-Policy"]
        assert f"script-src 'nonce-{nonces[0]}'" in policy and "default-src 'none'" in policy


async def _judge_shown_page(store: ReviewQueueStore, reviewers: Reviewers) -> AsyncIterator[Page]:
    published = RecordingPublisher()
    app = build_app(
        store=store,
        reviewers=reviewers,
        publish=published,
        now=lambda: NOW,
        show_judge_verdict=True,
    )
    async with TestClient(TestServer(app)) as client:
        yield Page(client, store, published)


@pytest.fixture()
async def judge_shown(store: ReviewQueueStore, reviewers: Reviewers) -> AsyncIterator[Page]:
    async for built in _judge_shown_page(store, reviewers):
        yield built


async def test_by_default_the_item_page_hides_the_judges_verdicts_and_flags(
    page: Page,
) -> None:
    """A reviewer who saw the verdict first would be anchored on it."""
    await sign_in(page)
    html = await (await page.client.get("/items/a1")).text()
    assert 'class="span v-plain" data-claim="1" title="claim 1">' in html
    assert 'class="span v-plain" data-claim="2" title="claim 2">' in html
    for leak in (
        "judge:",
        "v-contradicted",
        "v-unsupported",
        "flagged by the judge",
        "random sample",
        "withhold",
        "hallucinated<",
        "faithfulness",
        "NUMBER_MISMATCH",
        "a number differs",
        'class="score"',
        'class="reasons"',
    ):
        assert leak not in html, leak
    # The claims, the evidence and the deciding sentence are all still there.
    assert re.search(
        r'<mark class="v-plain" title="decided claim 1">'
        r"The order 7 was shipped on 5 May from the Lyon warehouse\.",
        html,
    ), html
    assert 'id="claim-0"' in html and 'id="claim-1"' in html


async def test_the_item_page_shows_verdicts_reasons_evidence_and_why_it_was_sampled(
    judge_shown: Page,
) -> None:
    page = judge_shown
    await sign_in(page)
    html = await (await page.client.get("/items/a1")).text()
    assert 'class="span v-contradicted" data-claim="1"' in html
    assert 'class="span v-unsupported" data-claim="2"' in html
    # Reasons in plain words, never the judge's codes and numbers.
    assert "<li>a number differs from the evidence</li>" in html
    assert "NUMBER_MISMATCH" not in html
    assert 'id="sampled">flagged by the judge<' in html
    assert "judge: withhold, hallucinated" in html
    # The deciding sentence of claim 1 within evidence D1 is highlighted.
    assert re.search(
        r'<mark class="v-contradicted" title="decided claim 1">'
        r"The order 7 was shipped on 5 May from the Lyon warehouse\.",
        html,
    ), html
    # Nothing is pre-selected: the reviewer is not anchored on the judge's verdicts.
    inputs = re.findall(r"<input[^>]*>", html)
    assert len([i for i in inputs if 'type="radio"' in i]) == 2 * 4 + 3
    assert not [i for i in inputs if "checked" in i]
    for key in ("<kbd>j</kbd>", "<kbd>h</kbd>", "<kbd>n</kbd>", "<kbd>Enter</kbd>"):
        assert key in html


async def test_behind_a_tls_proxy_the_session_cookie_is_still_secure(
    store: ReviewQueueStore, reviewers: Reviewers
) -> None:
    """The page sees plain HTTP from a TLS-terminating ingress; the browser is on HTTPS."""
    for secure_cookies in (False, True):
        app = build_app(
            store=store,
            reviewers=reviewers,
            publish=RecordingPublisher(),
            secure_cookies=secure_cookies,
        )
        async with TestClient(TestServer(app)) as client:
            response = await client.post("/login", data={"token": ALICE}, allow_redirects=False)
            cookie = response.headers["Set-Cookie"]
        assert response.status == 303 and "HttpOnly" in cookie
        assert ("Secure" in cookie) is secure_cookies


# --- sessions end, forms count once ---------------------------------------------------


def form_of(html: str) -> str:
    found = re.search(r'name="form" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


async def test_signing_out_revokes_the_session_cookie(page: Page) -> None:
    csrf = await sign_in(page)
    copied = next(c for c in page.client.session.cookie_jar if c.key == COOKIE).value
    out = await page.client.post("/logout", data={"csrf": csrf}, allow_redirects=False)
    assert out.status == 303 and out.cookies[COOKIE].value == ""
    # The copied cookie, sent again as it was, no longer signs anyone in.
    page.client.session.cookie_jar.clear()
    page.client.session.cookie_jar.update_cookies({COOKIE: copied})
    home = await page.client.get("/", allow_redirects=False)
    assert home.status == 303 and home.headers["Location"] == "/login"
    posted = await page.client.post("/items/a1/labels", data={"csrf": csrf, "answer": "faithful"})
    assert posted.status == 401 and page.published.events == []


async def test_a_session_ends_at_its_maximum_age(
    store: ReviewQueueStore, reviewers: Reviewers
) -> None:
    clock = [1_000_000.0]
    sessions = SessionBook(max_age_s=60, clock=lambda: clock[0])
    app = build_app(
        store=store, reviewers=reviewers, publish=RecordingPublisher(), sessions=sessions
    )
    async with TestClient(TestServer(app)) as client:
        signed_in = await client.post("/login", data={"token": ALICE}, allow_redirects=False)
        assert "Max-Age=60" in signed_in.headers["Set-Cookie"]
        assert (await client.get("/", allow_redirects=False)).status == 200
        clock[0] += 61
        assert (await client.get("/", allow_redirects=False)).status == 303


async def test_four_concurrent_submits_of_one_form_publish_one_label(
    store: ReviewQueueStore, reviewers: Reviewers
) -> None:
    published = RecordingPublisher(delay_s=0.2)  # the broker's acknowledgement takes a while
    app = build_app(store=store, reviewers=reviewers, publish=published, now=lambda: NOW)
    async with TestClient(TestServer(app)) as client:
        await client.post("/login", data={"token": ALICE})
        html = await (await client.get("/items/a1")).text()
        data = {"csrf": csrf_of(html), "form": form_of(html), "answer": "faithful"}
        replies = await asyncio.gather(
            *(client.post("/items/a1/labels", data=data, allow_redirects=False) for _ in range(4))
        )
        assert [r.status for r in replies] == [303] * 4, "a repeat is answered like the first"
        assert len(published.events) == 1 and store.has_labelled("a1", "alice")
        # A later replay of the same form: still one label.
        late = await client.post("/items/a1/labels", data=data, allow_redirects=False)
        assert late.status == 303 and len(published.events) == 1
        # Another form for the same answer finds it labelled.
        other = {**data, "form": form_of(await (await client.get("/items/a1")).text())}
        assert other["form"] != data["form"]
        assert (await client.post("/items/a1/labels", data=other)).status == 409
        assert len(published.events) == 1


async def test_a_malformed_form_token_is_refused(page: Page) -> None:
    csrf = await sign_in(page)
    data = {"csrf": csrf, "form": "<script>", "answer": "faithful"}
    response = await page.client.post("/items/a1/labels", data=data)
    assert response.status == 400 and page.published.events == []


async def test_behind_a_trusted_proxy_an_https_request_gets_a_secure_cookie(
    store: ReviewQueueStore, reviewers: Reviewers
) -> None:
    https = {"X-Forwarded-Proto": "https"}
    for trusted, headers, secure in (
        (True, https, True),
        (True, {"X-Forwarded-Proto": "http"}, False),
        (True, {}, False),
        (False, https, False),  # an untrusted header says nothing
    ):
        app = build_app(
            store=store,
            reviewers=reviewers,
            publish=RecordingPublisher(),
            trust_forwarded_proto=trusted,
        )
        async with TestClient(TestServer(app)) as client:
            response = await client.post(
                "/login", data={"token": ALICE}, headers=headers, allow_redirects=False
            )
            cookie = response.headers["Set-Cookie"]
        assert response.status == 303 and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert ("Secure" in cookie) is secure, (trusted, headers)


async def test_a_shared_answer_id_is_labelled_for_the_tenant_shown(
    store: ReviewQueueStore, tmp_path: Path
) -> None:
    """Answer ids are each tenant's own: a reviewer of both tenants labels the item it was
    shown, and the other tenant's item of the same id stays in its queue."""
    both = new_token()
    path = tmp_path / "both.toml"
    path.write_text(token_stanza("hana", ["acme", "globex"], both))
    store.add([review_item("a1", minutes=1, tenant="globex")])  # acme's a1 is queued too
    published = RecordingPublisher()
    app = build_app(store=store, reviewers=Reviewers.load(path), publish=published, now=lambda: NOW)
    async with TestClient(TestServer(app)) as client:
        await client.post("/login", data={"token": both})
        html = await (await client.get("/items/a1?tenant=globex")).text()
        action = re.search(r'<form method="post" action="([^"]+)" id="label-form">', html)
        assert action is not None and action.group(1) == "/items/a1/labels?tenant=globex"
        data = {"csrf": csrf_of(html), "form": form_of(html), "answer": "faithful"}
        labelled = await client.post(action.group(1), data=data, allow_redirects=False)
        assert labelled.status == 303
        [event] = published.events
        assert (event.answer_id, event.tenant) == ("a1", "globex")
        assert store.has_labelled("a1", "hana", tenant="globex")
        assert not store.has_labelled("a1", "hana", tenant="acme")
        acme = await (await client.get("/items/a1?tenant=acme")).text()
        assert 'id="already"' not in acme and "?tenant=acme" in acme


async def test_calibrator_internals_never_reach_the_reviewer(
    judge_shown: Page,
) -> None:
    item = review_item("c1", minutes=3)
    first, *rest = item.judgement.claims
    internals = "CALIBRATED_RISK: 0.96 >= 0.45 (unknown_numbers +4.87, entail_logit_max -1.20)"
    first = first.model_copy(update={"reasons": [internals]})
    judgement = item.judgement.model_copy(update={"claims": [first, *rest]})
    judge_shown.store.add([item.model_copy(update={"judgement": judgement})])
    await sign_in(judge_shown)
    html = await (await judge_shown.client.get("/items/c1")).text()
    assert "<li>weighed from several signals together</li>" in html
    for leak in ("CALIBRATED_RISK", "0.96", "0.45", "unknown_numbers", "4.87"):
        assert leak not in html, leak
