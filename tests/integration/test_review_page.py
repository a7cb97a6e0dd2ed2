"""The review page in a real browser on a real Kafka: review items published to the queue
topic reach the page, a reviewer signs in with its token and labels one item by clicking
and another by keyboard shortcuts, and the label events are on the labels topic. And the
page's queue store on a real PostgreSQL, as on SQLite.

The browser is Debian's chromium driven by Selenium through Debian's chromedriver
(``apt-get install chromium chromium-driver``; scripts/test.sh installs them as root).
Nothing downloads a browser. Without them the test skips, or fails under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from streamproc.cli.review import serve
from streamproc.config import Settings
from streamproc.contracts.label_events import ClaimLabel, ClaimLabelValue, LabelEvent, ReviewItem
from streamproc.kafka.topics import ensure_topics, review_topic_specs
from streamproc.review.page.auth import Reviewers, new_token, token_stanza
from streamproc.review.page.queue_store import ReviewQueueStore
from streamproc.wiring import output_topics, topic_layout
from tests.unit.review.page import test_queue_store as queue_tests
from tests.unit.review.page.samples import review_item

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20.0


def browser_or_skip() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if shutil.which("chromium") is None and CHROMIUM not in missing:
        missing.append("chromium on PATH")
    if not missing:
        return
    reason = (
        f"{', '.join(missing)} missing (apt-get install chromium chromium-driver; "
        "scripts/test.sh does it as root)"
    )
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; CI is set, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


@pytest.fixture()
def driver() -> Iterator[WebDriver]:
    browser_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    chrome = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    chrome.implicitly_wait(0)
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture()
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    run = uuid.uuid4().hex[:8]
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("")
    return Settings(
        app_id=f"review-{run}",
        broker_url=f"kafka://{kafka_bootstrap}",
        topics={"partitions": 2},
        review={
            "queue_topic": f"review-{run}.queue",
            "labels_topic": f"review-{run}.labels",
            "tokens_file": tokens,
            "store_url": f"sqlite:///{tmp_path / 'review.db'}",
            "host": "127.0.0.1",
            "port": 0,
            "labels_per_item": 1,
            "second_label_share": 0.0,
        },
    )


async def publish_items(settings: Settings, items: list[ReviewItem]) -> None:
    """The items as the judging stage publishes them, and one record that is not an item."""
    topic = output_topics(settings).review_items
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for item in items:
            record = topic.record(item)
            await producer.send_and_wait(record.topic, value=record.value, key=record.key)
        await producer.send_and_wait(topic.name, value=b"{not a review item", key=b"junk")
    finally:
        await producer.stop()


async def read_labels(settings: Settings, count: int) -> list[LabelEvent]:
    consumer = AIOKafkaConsumer(
        settings.review.labels_topic,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    found: list[tuple[bytes | None, LabelEvent]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(found) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                found += [(m.key, LabelEvent.model_validate_json(m.value)) for m in messages]
    finally:
        await consumer.stop()
    assert all(key == event.answer_id.encode() for key, event in found), "keyed by answer id"
    return sorted((event for _, event in found), key=lambda e: e.labelled_at)


def label_in_the_browser(driver: WebDriver, url: str, token: str) -> list[str]:
    """Sign in, label the first item by clicking, skip the second with ``n``, label the
    third by keys; returns the answer ids the page showed, in order."""
    # The page is replaced under the wait while the next item loads: an element found a
    # moment ago may be gone by the time its text is read (tried again, not a failure).
    wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=[StaleElementReferenceException])
    seen: list[str] = []

    def showing() -> str:
        def changed(d: WebDriver) -> str | None:
            try:
                elements = d.find_elements(By.ID, "answer-id")
                shown = elements[0].text if elements else ""
            except WebDriverException:  # chromium's "node does not belong to the document"
                return None  # is a stale element by another name: read it again
            return shown if shown and (not seen or shown != seen[-1]) else None

        shown = wait.until(changed)
        assert shown is not None
        seen.append(shown)
        return shown

    def keys(*pressed: str) -> None:
        ActionChains(driver).send_keys(*pressed).perform()

    driver.get(f"{url}/")
    wait.until(lambda d: d.find_elements(By.ID, "token"))
    driver.find_element(By.ID, "token").send_keys("not-the-token")
    driver.find_element(By.ID, "sign-in").click()
    wait.until(lambda d: d.find_elements(By.ID, "login-error"))
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()

    showing()  # r1: by clicking the labels, as a person does
    for choice in ("claim-0-contradicted", "claim-1-unsupported", "answer-hallucinated"):
        driver.find_element(By.CSS_SELECTOR, f"label:has(> #{choice})").click()
    driver.find_element(By.ID, "note").send_keys("shipped on 5 May, not 3")
    driver.find_element(By.ID, "submit").click()

    showing()  # r2: skipped with n
    keys("n")

    showing()  # r3: 1 (claim 1 supported; the focus moves to claim 2), 3 (unsupported), h
    keys("1", "3", "h")
    assert driver.find_element(By.ID, "claim-0-supported").is_selected()
    assert driver.find_element(By.ID, "claim-1-unsupported").is_selected()
    assert driver.find_element(By.ID, "answer-hallucinated").is_selected()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()

    showing()  # r2 again: the skipped item comes back last
    return seen


async def test_a_reviewer_labels_items_in_the_browser_and_the_labels_are_on_kafka(
    settings: Settings, driver: WebDriver
) -> None:
    token = new_token()
    assert settings.review.tokens_file is not None
    settings.review.tokens_file.write_text(token_stanza("alice", ["acme"], token))
    reviewers = Reviewers.load(settings.review.tokens_file)
    await ensure_topics(
        settings.bootstrap_servers,
        review_topic_specs(topic_layout(settings))[:2],
        settings.security,
    )
    faithful = "The order 7 was shipped on 5 May from the Lyon warehouse [D1]."
    items = [
        review_item("r1", minutes=1),
        review_item("r2", minutes=2, answer=faithful),
        review_item("r3", minutes=3),
        review_item("g1", minutes=0, tenant="globex"),  # never shown to alice
    ]
    await publish_items(settings, items)

    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(settings, reviewers=reviewers, stop=stop, started=port.set_result)
    )
    try:
        url = f"http://127.0.0.1:{await asyncio.wait_for(port, WAIT_S)}"
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + WAIT_S
            while True:
                health = await (await http.get(f"{url}/healthz")).json()
                if health["intake"]["read"] == len(items) + 1:
                    assert health["intake"]["queued"] == len(items)
                    assert health["intake"]["unreadable"] == 1, "skipped, and the page goes on"
                    break
                assert time.monotonic() < deadline, f"items not queued: {health}"
                await asyncio.sleep(0.2)

        seen = await asyncio.to_thread(label_in_the_browser, driver, url, token)
        assert seen == ["r1", "r2", "r3", "r2"]

        labels = await read_labels(settings, 2)
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_S)

    assert [e.answer_id for e in labels] == ["r1", "r3"]
    clicked, keyed = labels
    assert {e.reviewer for e in labels} == {"alice"} and {e.tenant for e in labels} == {"acme"}
    assert {e.source for e in labels} == {"review-page"}
    assert clicked.claims == [
        ClaimLabel(index=0, label=ClaimLabelValue.CONTRADICTED),
        ClaimLabel(index=1, label=ClaimLabelValue.UNSUPPORTED),
    ]
    assert clicked.answer_label == "hallucinated" and clicked.note == "shipped on 5 May, not 3"
    assert keyed.claims == [
        ClaimLabel(index=0, label=ClaimLabelValue.SUPPORTED),
        ClaimLabel(index=1, label=ClaimLabelValue.UNSUPPORTED),
    ]
    assert keyed.answer_label == "hallucinated" and keyed.note is None
    assert len({e.label_id for e in labels}) == 2


@pytest.mark.parametrize(
    "scenario",
    [
        queue_tests.test_items_come_oldest_first_and_only_of_the_reviewers_tenants,
        queue_tests.test_a_labelled_item_leaves_the_queue_once_it_has_its_labels,
        queue_tests.test_a_reviewer_labels_an_answer_once,
        queue_tests.test_a_redelivered_item_is_queued_once,
        queue_tests.test_a_skipped_item_comes_back_after_the_rest,
        queue_tests.test_another_tenants_item_is_not_found,
    ],
    ids=lambda scenario: scenario.__name__.removeprefix("test_"),
)
def test_the_queue_store_behaves_the_same_on_postgresql(
    postgres_database: str, scenario: Callable[[ReviewQueueStore], None]
) -> None:
    with ReviewQueueStore(postgres_database, labels_per_item=1) as store:
        scenario(store)


def test_doubly_wanted_items_on_postgresql(postgres_database: str) -> None:
    with ReviewQueueStore(postgres_database, labels_per_item=1, second_label_share=1.0) as store:
        store.add([review_item("a1")])
        assert store.wanted("a1") == 2
        assert queue_tests.label(store, "a1", queue_tests.ALICE)
        assert store.next_item(queue_tests.ALICE) is None
        assert store.next_item(queue_tests.BOB) is not None
        assert queue_tests.label(store, "a1", queue_tests.BOB)
        assert store.next_item(queue_tests.BOB) is None
