"""The review page's sessions and forms on real HTTP and a real Kafka (``review serve``):
a form sent four times at once, or double-clicked in chromium, is one label on the labels
topic; a session cookie copied before sign-out is refused after it; the cookie is Secure
when the page is served over TLS, or behind a trusted proxy that says HTTPS."""

from __future__ import annotations

import asyncio
import re
import ssl
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from streamproc.cli.review import serve
from streamproc.config import Settings
from streamproc.contracts.label_events import LabelEvent
from streamproc.kafka.topics import ensure_topics, review_topic_specs
from streamproc.review.page.auth import Reviewers, new_token, token_stanza
from streamproc.review.page.server import COOKIE
from streamproc.wiring import topic_layout
from tests.integration import test_review_page as page_tests
from tests.unit.review.page.samples import review_item

TOKEN = new_token()
WAIT_S = page_tests.WAIT_S
publish_items = page_tests.publish_items
# The review page test's fixtures: its settings (fresh topics, tokens file, SQLite store)
# and its chromium.
settings = page_tests.settings
driver = page_tests.driver


@asynccontextmanager
async def review_page(settings: Settings, items: int = 2) -> AsyncIterator[str]:
    """``review serve`` with alice's token and ``items`` queued items; yields its URL."""
    assert settings.review.tokens_file is not None
    settings.review.tokens_file.write_text(token_stanza("alice", ["acme"], TOKEN))
    reviewers = Reviewers.load(settings.review.tokens_file)
    await ensure_topics(
        settings.bootstrap_servers,
        review_topic_specs(topic_layout(settings))[:2],
        settings.security,
    )
    await publish_items(settings, [review_item(f"r{n}", minutes=n) for n in range(1, items + 1)])
    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(settings, reviewers=reviewers, stop=stop, started=port.set_result)
    )
    scheme = "https" if settings.review.tls_cert else "http"
    try:
        url = f"{scheme}://127.0.0.1:{await asyncio.wait_for(port, WAIT_S)}"
        context = tls_client(settings)
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + WAIT_S
            while True:
                health = await (await http.get(f"{url}/healthz", ssl=context)).json()
                if health["intake"]["queued"] == items:
                    break
                assert time.monotonic() < deadline, f"items not queued: {health}"
                await asyncio.sleep(0.2)
        yield url
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_S)


def tls_client(settings: Settings) -> ssl.SSLContext | bool:
    cert = settings.review.tls_cert
    return ssl.create_default_context(cafile=str(cert)) if cert else True


def client(settings: Settings) -> aiohttp.ClientSession:
    # unsafe: keep cookies of an IP-address host (127.0.0.1), as a browser does
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        connector=aiohttp.TCPConnector(ssl=tls_client(settings)),
    )


def field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


async def labels_on_topic(settings: Settings) -> list[LabelEvent]:
    """Every label on the labels topic now (up to its end offsets)."""
    consumer = AIOKafkaConsumer(
        settings.review.labels_topic,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        found: list[LabelEvent] = []
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():  # every partition, once the metadata is in
            assert time.monotonic() < deadline, "the labels topic was never assigned"
            batches = await consumer.getmany(timeout_ms=200)
            for messages in batches.values():
                found += [LabelEvent.model_validate_json(m.value) for m in messages]
        partitions = sorted(consumer.assignment())
        ends = await consumer.end_offsets(partitions)
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            assert time.monotonic() < deadline, "the labels topic was not read to its end"
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                found += [LabelEvent.model_validate_json(m.value) for m in messages]
        return found
    finally:
        await consumer.stop()


async def sign_in(http: aiohttp.ClientSession, url: str, **headers: str) -> aiohttp.ClientResponse:
    return await http.post(
        f"{url}/login", data={"token": TOKEN}, headers=headers, allow_redirects=False
    )


async def test_four_concurrent_submits_of_one_form_are_one_label_on_kafka(
    settings: Settings,
) -> None:
    async with review_page(settings) as url, client(settings) as http:
        assert (await sign_in(http, url)).status == 303
        html = await (await http.get(f"{url}/items/r1")).text()
        form = {"csrf": field(html, "csrf"), "form": field(html, "form"), "answer": "faithful"}
        replies = await asyncio.gather(
            *(
                http.post(f"{url}/items/r1/labels", data=form, allow_redirects=False)
                for _ in range(4)
            )
        )
        statuses = [reply.status for reply in replies]
        labels = await labels_on_topic(settings)
    assert statuses == [303] * 4, "each repeat is answered like the first"
    assert [(label.answer_id, label.reviewer) for label in labels] == [("r1", "alice")]


async def test_a_double_click_in_the_browser_is_one_label_on_kafka(
    settings: Settings, driver: WebDriver
) -> None:
    async with review_page(settings) as url:

        def double_click() -> None:
            wait = WebDriverWait(driver, WAIT_S)
            driver.get(f"{url}/login")
            wait.until(lambda d: d.find_elements(By.ID, "token"))
            driver.find_element(By.ID, "token").send_keys(TOKEN)
            driver.find_element(By.ID, "sign-in").click()
            wait.until(lambda d: d.find_elements(By.ID, "answer-id"))
            assert driver.find_element(By.ID, "answer-id").text == "r1"
            driver.find_element(By.CSS_SELECTOR, "label:has(> #answer-faithful)").click()
            ActionChains(driver).double_click(driver.find_element(By.ID, "submit")).perform()
            # the page moves on to the next item, not to an error
            wait.until(
                lambda d: (
                    d.find_elements(By.ID, "answer-id")
                    and d.find_element(By.ID, "answer-id").text == "r2"
                )
            )

        await asyncio.to_thread(double_click)
        labels = await labels_on_topic(settings)
    assert [(label.answer_id, label.reviewer) for label in labels] == [("r1", "alice")]


async def test_a_session_cookie_copied_before_sign_out_is_refused_after_it(
    settings: Settings,
) -> None:
    async with review_page(settings) as url:
        async with client(settings) as http:
            assert (await sign_in(http, url)).status == 303
            html = await (await http.get(f"{url}/")).text()
            csrf = field(html, "csrf")
            copied = next(c for c in http.cookie_jar if c.key == COOKIE).value
            out = await http.post(f"{url}/logout", data={"csrf": csrf}, allow_redirects=False)
            assert out.status == 303
        async with aiohttp.ClientSession(cookies={COOKIE: copied}) as replay:
            home = await replay.get(f"{url}/", allow_redirects=False)
            posted = await replay.post(
                f"{url}/items/r1/labels", data={"csrf": csrf, "answer": "faithful"}
            )
        assert home.status == 303 and home.headers["Location"] == "/login"
        assert posted.status == 401
        assert await labels_on_topic(settings) == []


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-days", "2", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_served_over_tls_the_session_cookie_is_secure(
    settings: Settings, tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path)
    tls = settings.overriding("review", tls_cert=cert, tls_key=key)
    async with review_page(tls, items=1) as url, client(tls) as http:
        assert url.startswith("https://")
        signed_in = await sign_in(http, url)
        cookie = signed_in.headers["Set-Cookie"]
    assert signed_in.status == 303
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie


@pytest.mark.parametrize("trusted", [True, False])
async def test_behind_a_trusted_proxy_the_session_cookie_is_secure(
    settings: Settings, trusted: bool
) -> None:
    proxied = settings.overriding("review", trust_forwarded_proto=trusted)
    async with review_page(proxied, items=1) as url, client(proxied) as http:
        over_https = await sign_in(http, url, **{"X-Forwarded-Proto": "https"})
        over_http = await sign_in(http, url)
    assert over_https.status == over_http.status == 303
    assert ("Secure" in over_https.headers["Set-Cookie"]) is trusted
    assert "Secure" not in over_http.headers["Set-Cookie"]
