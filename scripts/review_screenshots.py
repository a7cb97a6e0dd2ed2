"""Screenshots of the review page for the README: ``docs/images/review-login.png`` and
``docs/images/review-page.png``.

Starts the page on a temporary store filled with sample answers judged by the rules judge
(no Kafka: the items go into the store directly and labels to a publisher that drops
them), signs in with a fresh token in Debian's headless chromium (Selenium, through
Debian's chromedriver: ``apt-get install chromium chromium-driver``) and saves the pages.

    .venv/bin/python scripts/review_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

# Imported after the path is set, for the reason above.
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind  # noqa: E402
from streamproc.contracts.label_events import LabelEvent, ReviewItem, SampledBecause  # noqa: E402
from streamproc.inference.options import JudgeSettings  # noqa: E402
from streamproc.review.page.auth import Reviewer, Reviewers, hash_token, new_token  # noqa: E402
from streamproc.review.page.queue_store import ReviewQueueStore  # noqa: E402
from streamproc.review.page.server import ReviewServer, build_app  # noqa: E402
from streamproc.wiring import build_judge  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH = 1440
WHEN = datetime(2026, 11, 30, 14, 5, tzinfo=UTC)

SAMPLES: list[tuple[str, str, list[EvidenceItem]]] = [
    (
        "Is the Lyon store open on Sunday, and can I still return the kettle I opened?",
        (
            "The Lyon Part-Dieu store is open on Sunday from 10:00 to 18:00 [R1]. "
            "You can return an opened item within 14 days if you keep the receipt [D1]. "
            "Refunds are paid in cash at the counter."
        ),
        [
            EvidenceItem(
                id="D1",
                text=(
                    "Returns policy. Opened items can be returned within 14 days with the "
                    "receipt. Refunds go back to the original payment method within 5 "
                    "working days. Gift cards cannot be refunded."
                ),
                source="help-center/returns",
            ),
            EvidenceItem(
                id="R1",
                kind=EvidenceKind.RECORD,
                text="Store record: Lyon Part-Dieu.",
                source="stores-db",
                fields={
                    "store": "Lyon Part-Dieu",
                    "hours": {"saturday": "09:00-19:00", "sunday": "closed"},
                },
            ),
        ],
    ),
    (
        "When was order 7 shipped?",
        "Order 7 was shipped on 5 May from the Lyon warehouse [D1].",
        [EvidenceItem(id="D1", text="Order 7 was shipped on 5 May from the Lyon warehouse.")],
    ),
]


def review_items() -> list[ReviewItem]:
    judge = build_judge(JudgeSettings(name="rules"))
    items = []
    for number, (question, answer, evidence) in enumerate(SAMPLES, start=1):
        event = AnswerEvent(
            event_id=f"ev-{number}",
            answer_id=f"ans-2026-11-30-{number:04d}",
            conversation_id=f"conv-{number}",
            tenant="acme",
            assistant_id="support-bot",
            model="llm-large-2026-10",
            occurred_at=WHEN + timedelta(minutes=number),
            question=question,
            answer=answer,
            evidence=evidence,
        )
        judgement = judge.judge_batch([event])[0]
        flagged = judgement.action.value != "pass"
        items.append(
            ReviewItem(
                answer_id=event.answer_id,
                event_id=event.event_id,
                conversation_id=event.conversation_id,
                tenant=event.tenant,
                assistant_id=event.assistant_id,
                model=event.model,
                task_type="QA",
                occurred_at=event.occurred_at,
                judged_at=event.occurred_at + timedelta(seconds=2),
                sampled_because=SampledBecause.FLAGGED if flagged else SampledBecause.RANDOM,
                inclusion_probability=1.0 if flagged else 0.02,
                question=event.question,
                answer=event.answer,
                evidence=event.evidence,
                judgement=judgement,
                judge=judge.info,
                judge_key="rules-1",
            )
        )
    return items


async def _drop(event: LabelEvent) -> None:
    """The screenshots publish nothing."""


def chromium() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={WIDTH},900")
    options.add_argument("--force-device-scale-factor=1")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def capture(driver: WebDriver, path: Path, *, min_height: int = 700) -> None:
    """The whole page, however tall."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, max(min_height, int(height)) + 140)
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def shoot(url: str, token: str, out: Path) -> None:
    driver = chromium()
    try:
        wait = WebDriverWait(driver, 20)
        driver.get(f"{url}/login")
        wait.until(lambda d: d.find_elements(By.ID, "token"))
        capture(driver, out / "review-login.png", min_height=560)
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "sign-in").click()
        wait.until(lambda d: d.find_elements(By.ID, "answer-id"))
        # A reviewer half-way through: claim 1 labelled, the focus on claim 2.
        ActionChains(driver).send_keys("2").perform()
        driver.execute_script("window.scrollTo(0, 0)")
        capture(driver, out / "review-page.png")
    finally:
        driver.quit()


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    token = new_token()
    reviewers = Reviewers([Reviewer("alice", frozenset({"acme"}), hash_token(token))])
    with tempfile.TemporaryDirectory() as tmp:
        store = ReviewQueueStore(f"sqlite:///{Path(tmp) / 'review.db'}")
        store.add(review_items())
        server = ReviewServer(
            build_app(store=store, reviewers=reviewers, publish=_drop), host="127.0.0.1", port=0
        )
        await server.start()
        try:
            await asyncio.to_thread(shoot, f"http://127.0.0.1:{server.port}", token, out)
        finally:
            await server.stop()
            store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    asyncio.run(main(parser.parse_args().out))
