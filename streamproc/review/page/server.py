"""The review page: aiohttp, rendered on the server with Jinja2, no JavaScript build.

``GET /`` shows the reviewer's next item; ``POST /items/{answer_id}/labels`` turns the
form into a :class:`~streamproc.contracts.label_events.LabelEvent`, publishes it (and waits for the
broker's acknowledgement), records who labelled the answer, and redirects to the next
item. A reviewer signs in with its token (``/login``): the page keeps a signed session in
an HttpOnly, SameSite=Strict cookie, never the token; the cookie is Secure when the page
is reached over HTTPS - served with TLS, or behind a proxy whose ``X-Forwarded-Proto`` the
page is told to trust, or with ``secure_cookies``. Programs may send
``Authorization: Bearer <token>`` instead. A reviewer sees only its tenants' items; an
item of another tenant answers 404, exactly like an unknown one.

A cookie is good only while its session is open on the server
(:class:`~streamproc.review.page.sessions.SessionBook`): signing out closes it, so a
copy of the cookie is refused from then on, and every session ends ``session_max_age_s``
after sign-in. The session signing key is drawn when the page starts
(``build_app(secret=...)`` may give one) and the open sessions are kept in memory: a
restart signs reviewers out, and replicas behind one address need sticky sessions, or
bearer tokens.

A label form is sent at most once per reviewer and answer, however often it is submitted
(:mod:`~streamproc.review.page.submissions`): each rendered form carries a form token,
the label id is derived from it, and only one request of a reviewer for an answer may
publish; a repeat of the same form is answered like the first.

The judge's verdicts, flags and reasons are left off the page unless ``show_judge_verdict``
(a reviewer who sees them first is anchored on them); when shown, reasons are plain phrases,
never the judge's scores and calibrator signals (:mod:`~streamproc.review.page.reasons`).

Forms carry a per-session CSRF token; the browser defences of every response are
:mod:`~streamproc.review.page.page_security`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import structlog
from aiohttp import web

from streamproc.contracts.label_events import (
    MAX_NOTE_CHARS,
    AnswerLabel,
    ClaimLabel,
    ClaimLabelValue,
    LabelEvent,
    ReviewItem,
)
from streamproc.review.page.auth import Reviewer, Reviewers
from streamproc.review.page.intake import ReviewIntake
from streamproc.review.page.page_security import NONCE, same_origin_posts, security_headers
from streamproc.review.page.publisher import LabelPublisher
from streamproc.review.page.queue_store import ReviewQueueStore
from streamproc.review.page.sessions import SessionBook
from streamproc.review.page.submissions import (
    FORM_TOKEN,
    KeyedLocks,
    SubmissionKey,
    SubmissionLedger,
)
from streamproc.review.page.view import item_view
from streamproc.web.limits import HttpLimits
from streamproc.web.server import AppServer

__all__ = ["COOKIE", "ReviewServer", "build_app"]

log = structlog.get_logger(__name__)

COOKIE = "streamproc_review"
SESSION_MAX_AGE_S = 12 * 3600
_HERE = Path(__file__).resolve().parent
_ANSWER_CHOICES: dict[str, AnswerLabel | None] = {
    "hallucinated": "hallucinated",
    "faithful": "faithful",
    "cant_tell": None,
}
_CLAIM_CHOICES = {value.value: value for value in ClaimLabelValue}

_STORE = web.AppKey("store", ReviewQueueStore)
_REVIEWERS: web.AppKey[Reviewers | None] = web.AppKey("reviewers")
_PUBLISH: web.AppKey[LabelPublisher] = web.AppKey("publish")
_SECRET = web.AppKey("secret", bytes)
_TEMPLATES = web.AppKey("templates", jinja2.Environment)
_INTAKE: web.AppKey[ReviewIntake | None] = web.AppKey("intake")
_NOW: web.AppKey[Callable[[], datetime]] = web.AppKey("now")
_SECURE_COOKIES: web.AppKey[bool] = web.AppKey("secure_cookies")
_TRUST_FORWARDED: web.AppKey[bool] = web.AppKey("trust_forwarded_proto")
_SHOW_JUDGE: web.AppKey[bool] = web.AppKey("show_judge_verdict")
_SESSIONS = web.AppKey("sessions", SessionBook)
_LEDGER = web.AppKey("ledger", SubmissionLedger)
_LOCKS = web.AppKey("locks", KeyedLocks)


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in reviewer; ``csrf`` is None for a bearer-token request (no cookie, so
    nothing for another site to ride on)."""

    reviewer: Reviewer
    csrf: str | None
    sid: str | None = None


def build_app(
    *,
    store: ReviewQueueStore,
    reviewers: Reviewers | None,
    publish: LabelPublisher,
    intake: ReviewIntake | None = None,
    secret: bytes | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    secure_cookies: bool = False,
    trust_forwarded_proto: bool = False,
    sessions: SessionBook | None = None,
    ledger: SubmissionLedger | None = None,
    show_judge_verdict: bool = False,
) -> web.Application:
    """The page's application. ``reviewers`` None (no tokens file): everyone is refused.
    ``publish`` sends one label and returns once the broker has it; ``intake``, when
    given, runs in the background for the application's lifetime. ``secure_cookies``:
    mark the session cookie Secure even on a plain-HTTP request - the page behind a
    TLS-terminating proxy sees HTTP, while the browser is on HTTPS;
    ``trust_forwarded_proto``: the same, only for requests the proxy marks
    ``X-Forwarded-Proto: https``. ``sessions`` (default: 12 h each) and ``ledger``
    (default: in the store's database) are where sign-ins and label claims are kept.
    ``show_judge_verdict``: show the judge's verdicts and plain reasons beside each claim
    (off: the reviewer decides unanchored)."""
    app = web.Application(middlewares=[security_headers, same_origin_posts])
    app[_STORE] = store
    app[_REVIEWERS] = reviewers
    app[_PUBLISH] = publish
    app[_SECRET] = secret or secrets.token_bytes(32)
    app[_TEMPLATES] = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    app[_INTAKE] = intake
    app[_NOW] = now
    app[_SECURE_COOKIES] = secure_cookies
    app[_TRUST_FORWARDED] = trust_forwarded_proto
    app[_SHOW_JUDGE] = show_judge_verdict
    app[_SESSIONS] = SessionBook(max_age_s=SESSION_MAX_AGE_S) if sessions is None else sessions
    app[_LEDGER] = SubmissionLedger(store.url) if ledger is None else ledger
    app[_LOCKS] = KeyedLocks()
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/login", _login_page)
    app.router.add_post("/login", _login)
    app.router.add_post("/logout", _logout)
    app.router.add_get("/", _next_item)
    app.router.add_get("/items/{answer_id}", _item)
    app.router.add_post("/items/{answer_id}/labels", _submit_labels)
    app.router.add_post("/items/{answer_id}/skip", _skip)
    app.router.add_static("/static", _HERE / "static", append_version=True)
    if intake is not None:
        app.cleanup_ctx.append(_run_intake)
    if ledger is None:
        app.on_cleanup.append(_close_ledger)
    return app


async def _close_ledger(app: web.Application) -> None:
    app[_LEDGER].close()


async def _run_intake(app: web.Application) -> AsyncIterator[None]:
    intake = app[_INTAKE]
    assert intake is not None
    task = asyncio.create_task(intake.run(), name="review-intake")
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


class ReviewServer(AppServer):
    """Serves an application on ``host:port`` (port 0: the OS picks; see :attr:`port`)."""

    def __init__(
        self,
        app: web.Application,
        *,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: HttpLimits | None = None,
    ) -> None:
        super().__init__(
            host=host, port=port, ssl_context=ssl_context, limits=limits or HttpLimits()
        )
        self._app = app

    def _application(self) -> web.Application:
        return self._app


# --- middlewares ----------------------------------------------------------------------


# --- sessions -------------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


def _sign(secret: bytes, payload: str, reviewer: Reviewer) -> str:
    # The token's hash is signed in: a session dies with its token's entry.
    message = f"{payload}|{reviewer.token_sha256}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def session_cookie(app: web.Application, reviewer: Reviewer) -> str:
    """The cookie value of a new session, opened in the app's session book: name, issue
    time, session id, CSRF token, signature."""
    opened = app[_SESSIONS].open(reviewer.name)
    payload = f"{_b64(reviewer.name)}.{opened.issued}.{opened.sid}.{secrets.token_urlsafe(24)}"
    return f"{payload}.{_sign(app[_SECRET], payload, reviewer)}"


def _from_cookie(app: web.Application, value: str) -> Session | None:
    """The session of a cookie that is signed by us and still open on the server."""
    reviewers = app[_REVIEWERS]
    if reviewers is None:
        return None
    try:
        name_b64, issued, sid, csrf, signature = value.split(".")
        name = _unb64(name_b64)
        issued_at = int(issued)
    except ValueError:
        return None
    reviewer = reviewers.by_name(name)
    if reviewer is None:
        return None
    expected = _sign(app[_SECRET], f"{name_b64}.{issued}.{sid}.{csrf}", reviewer)
    if not hmac.compare_digest(expected, signature):
        return None
    if not app[_SESSIONS].is_open(sid, reviewer.name, issued_at):
        return None  # signed out, expired, or opened by a page since restarted
    return Session(reviewer, csrf, sid)


def served_over_https(request: web.Request) -> bool:
    """The browser reached the page over HTTPS: TLS here, or a trusted proxy says so."""
    if request.secure:
        return True
    if not request.app[_TRUST_FORWARDED]:
        return False
    forwarded = request.headers.get("X-Forwarded-Proto", "")
    return forwarded.split(",")[0].strip().lower() == "https"


def _cookie_options(request: web.Request) -> dict[str, Any]:
    secure = served_over_https(request) or request.app[_SECURE_COOKIES]
    return {"httponly": True, "samesite": "Strict", "secure": secure, "path": "/"}


def _session(request: web.Request) -> Session | None:
    reviewers = request.app[_REVIEWERS]
    if reviewers is None:
        return None
    authorization = request.headers.get("Authorization", "")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        reviewer = reviewers.authenticate(token.strip())
        return None if reviewer is None else Session(reviewer, None)
    cookie = request.cookies.get(COOKIE)
    return None if cookie is None else _from_cookie(request.app, cookie)


def _require(request: web.Request) -> Session:
    """The session, or: a browser asking for a page goes to the login page; anything
    else (a POST, a program) gets 401."""
    session = _session(request)
    if session is not None:
        return session
    if request.method == "GET" and "Authorization" not in request.headers:
        raise web.HTTPSeeOther("/login")
    raise web.HTTPUnauthorized(
        text="sign in: a reviewer token is needed",
        headers={"WWW-Authenticate": 'Bearer realm="streamproc review"'},
    )


def _check_csrf(session: Session, form: Any) -> None:
    if session.csrf is None:
        return
    sent = form.get("csrf", "")
    if not isinstance(sent, str) or not hmac.compare_digest(sent, session.csrf):
        raise web.HTTPForbidden(text="the form is stale or not ours (CSRF token mismatch)")


# --- rendering ------------------------------------------------------------------------


def _render(request: web.Request, name: str, *, status: int = 200, **context: Any) -> web.Response:
    template = request.app[_TEMPLATES].get_template(name)
    text = template.render(nonce=request[NONCE], **context)
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _page(
    request: web.Request,
    session: Session,
    item: ReviewItem | None,
    *,
    waiting: int,
    status: int = 200,
    error: str | None = None,
    already: bool = False,
) -> web.Response:
    if item is None:
        return _render(request, "empty.html", status=status, session=session, waiting=waiting)
    return _render(
        request,
        "item.html",
        status=status,
        session=session,
        view=item_view(item, show_judge=request.app[_SHOW_JUDGE]),
        action_url=_item_url(item, "/labels"),
        form_token=secrets.token_urlsafe(16),
        skip_url=_item_url(item, "/skip"),
        waiting=waiting,
        error=error,
        already=already,
        choices=[
            ("supported", "Supported", "1"),
            ("contradicted", "Contradicted", "2"),
            ("unsupported", "Unsupported", "3"),
            ("cant_tell", "Can't tell", "4"),
        ],
    )


# --- handlers -------------------------------------------------------------------------


async def _healthz(request: web.Request) -> web.Response:
    intake = request.app[_INTAKE]
    reviewers = request.app[_REVIEWERS]
    detail: dict[str, object] = {
        "ok": True,
        "reviewers": None if reviewers is None else len(reviewers),
    }
    if intake is not None:
        stats = intake.stats
        detail["intake"] = {
            "connected": stats.connected,
            "read": stats.read,
            "queued": stats.queued,
            "unreadable": stats.unreadable,
            "last_error": stats.last_error,
        }
    return web.json_response(detail)


async def _login_page(request: web.Request) -> web.Response:
    if _session(request) is not None:
        raise web.HTTPSeeOther("/")
    configured = request.app[_REVIEWERS] is not None
    return _render(request, "login.html", error=None, configured=configured)


async def _login(request: web.Request) -> web.Response:
    form = await request.post()
    token = form.get("token", "")
    reviewers = request.app[_REVIEWERS]
    reviewer = (
        reviewers.authenticate(token.strip())
        if reviewers is not None and isinstance(token, str)
        else None
    )
    if reviewer is None:
        log.info("review_login_refused")
        return _render(
            request,
            "login.html",
            status=401,
            error="That token is not known here.",
            configured=reviewers is not None,
        )
    log.info("review_login", reviewer=reviewer.name)
    response = web.HTTPSeeOther("/")
    response.set_cookie(
        COOKIE,
        session_cookie(request.app, reviewer),
        max_age=int(request.app[_SESSIONS].max_age_s),
        **_cookie_options(request),
    )
    raise response


async def _logout(request: web.Request) -> web.Response:
    session = _require(request)
    _check_csrf(session, await request.post())
    if session.sid is not None:
        request.app[_SESSIONS].close(session.sid, session.reviewer.name)
        log.info("review_logout", reviewer=session.reviewer.name)
    response = web.HTTPSeeOther("/login")
    options = _cookie_options(request)
    response.set_cookie(COOKIE, "", max_age=0, expires="Thu, 01 Jan 1970 00:00:00 GMT", **options)
    raise response


async def _next_item(request: web.Request) -> web.Response:
    session = _require(request)
    store = request.app[_STORE]
    item = await asyncio.to_thread(store.next_item, session.reviewer)
    waiting = await asyncio.to_thread(store.waiting, session.reviewer)
    return _page(request, session, item, waiting=waiting)


def _item_url(item: ReviewItem, action: str = "") -> str:
    """The item's URL: answer ids are each tenant's own, so the tenant goes along."""
    answer_id, tenant = quote(item.answer_id, safe=""), quote(item.tenant, safe="")
    return f"/items/{answer_id}{action}?tenant={tenant}"


async def _visible(request: web.Request, session: Session) -> ReviewItem:
    """The item the URL names (``?tenant=``: of that tenant; without it, the first of
    the reviewer's tenants holding the answer id), if the reviewer may see it."""
    answer_id = request.match_info["answer_id"]
    tenant = request.query.get("tenant") or None
    store = request.app[_STORE]
    item = await asyncio.to_thread(store.item_for, session.reviewer, answer_id, tenant)
    if item is None:
        raise web.HTTPNotFound(text="no such item")
    return item


async def _item(request: web.Request) -> web.Response:
    session = _require(request)
    item = await _visible(request, session)
    store = request.app[_STORE]
    already = await asyncio.to_thread(
        store.has_labelled, item.answer_id, session.reviewer.name, tenant=item.tenant
    )
    waiting = await asyncio.to_thread(store.waiting, session.reviewer)
    return _page(request, session, item, waiting=waiting, already=already)


def _labels_from_form(item: ReviewItem, form: Any) -> tuple[str, list[ClaimLabel], str | None]:
    """(answer choice, claim labels, note) from the form; ValueError says what is wrong."""
    choice = form.get("answer", "")
    if choice not in _ANSWER_CHOICES:
        raise ValueError(
            "Choose the answer's label (hallucinated, faithful or can't tell) before submitting."
        )
    claims = []
    for claim in item.judgement.claims:
        value = form.get(f"claim-{claim.index}", "")
        if not value:
            continue  # left unselected: not labelled
        if value not in _CLAIM_CHOICES:
            raise ValueError(f"Claim {claim.index + 1}: unknown label.")
        claims.append(ClaimLabel(index=claim.index, label=_CLAIM_CHOICES[value]))
    note = form.get("note", "")
    note = note.strip() if isinstance(note, str) else ""
    if len(note) > MAX_NOTE_CHARS:
        raise ValueError(f"The note is longer than {MAX_NOTE_CHARS} characters.")
    return choice, claims, note or None


def _form_token(form: Any) -> str:
    """The form's token; a program posting without one gets a fresh one (its request is
    then one form of its own). A malformed one is refused."""
    sent = form.get("form", "")
    if not sent:
        return secrets.token_urlsafe(16)
    if not isinstance(sent, str) or FORM_TOKEN.fullmatch(sent) is None:
        raise web.HTTPBadRequest(text="the form token is malformed")
    return sent


async def _submit_labels(request: web.Request) -> web.Response:
    """Publish the form's label once: the first request of a reviewer for an answer
    claims it; the same form sent again is answered like the first (303 to the next
    item), another form for an answer already labelled gets 409."""
    session = _require(request)
    form = await request.post()
    _check_csrf(session, form)
    item = await _visible(request, session)
    store = request.app[_STORE]
    ledger = request.app[_LEDGER]
    reviewer = session.reviewer.name
    form_token = _form_token(form)
    waiting = await asyncio.to_thread(store.waiting, session.reviewer)
    try:
        choice, claims, note = _labels_from_form(item, form)
    except ValueError as exc:
        return _page(request, session, item, waiting=waiting, status=400, error=str(exc))
    key = SubmissionKey(item.tenant, item.answer_id, reviewer)
    now = request.app[_NOW]
    async with request.app[_LOCKS].hold(key):
        claim = await asyncio.to_thread(ledger.claim, key, form_token, now())
        if not claim.won:
            if claim.form_token == form_token:
                log.info("review_label_repeated", answer_id=item.answer_id, reviewer=reviewer)
                raise web.HTTPSeeOther("/")
            return _page(request, session, item, waiting=waiting, status=409, already=True)
        if await asyncio.to_thread(
            store.has_labelled, item.answer_id, reviewer, tenant=item.tenant
        ):
            await asyncio.to_thread(ledger.release, key, form_token)
            return _page(request, session, item, waiting=waiting, status=409, already=True)
        event = LabelEvent(
            label_id=claim.label_id,
            answer_id=item.answer_id,
            tenant=item.tenant,
            reviewer=reviewer,
            labelled_at=now(),
            answer_label=_ANSWER_CHOICES[choice],
            claims=claims,
            note=note,
            source="review-page",
        )
        try:
            await request.app[_PUBLISH](event)
        except Exception as exc:  # noqa: BLE001 - the reviewer is told; nothing was recorded
            await asyncio.to_thread(ledger.release, key, form_token)
            log.warning("review_label_not_published", answer_id=item.answer_id, error=repr(exc))
            return _page(
                request,
                session,
                item,
                waiting=waiting,
                status=502,
                error="The label could not be published (the broker did not acknowledge it). "
                "Nothing was recorded; submit again.",
            )
        recorded = await asyncio.to_thread(
            store.record_label,
            item.answer_id,
            reviewer,
            event.label_id,
            event.labelled_at,
            tenant=item.tenant,
        )
        await asyncio.to_thread(ledger.published, key, form_token)
    log.info(
        "review_label_published",
        answer_id=item.answer_id,
        label_id=event.label_id,
        reviewer=reviewer,
        first_time=recorded,
    )
    raise web.HTTPSeeOther("/")


async def _skip(request: web.Request) -> web.Response:
    session = _require(request)
    _check_csrf(session, await request.post())
    item = await _visible(request, session)
    await asyncio.to_thread(
        request.app[_STORE].skip, item.answer_id, session.reviewer.name, tenant=item.tenant
    )
    raise web.HTTPSeeOther("/")
