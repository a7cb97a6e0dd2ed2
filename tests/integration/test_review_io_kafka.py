"""``review import`` and ``review export`` on real Kafka: label files (JSONL and Label
Studio's export) become label events on the labels topic, keyed by answer id; review
items and labels on their topics come back as joined benchmark rows, read-committed.
An import proves its reviewer with a token, or its labels are recorded as by the import."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamproc.config import Settings
from streamproc.contracts.label_events import LabelEvent
from streamproc.kafka.topics import ensure_topics, review_topic_specs
from streamproc.review.label_files.exporter import labelled_rows, read_topic, run_export
from streamproc.review.label_files.importer import publish_labels, read_labels, run_import
from streamproc.review.page.auth import new_token, token_stanza
from streamproc.wiring import (
    kafka_connection,
    label_export_options,
    label_import_options,
    topic_layout,
)
from tests.integration.run_settings import run_settings
from tests.unit.review.label_files.items import label, review_item

EXPORT = Path(__file__).resolve().parents[1] / "unit" / "review" / "label_files" / "data"
ANA_TOKEN = new_token()
ANA = {"reviewer": "ana", "tenant": "acme", "token": ANA_TOKEN}


@pytest.fixture()
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_stanza("ana", ["acme"], ANA_TOKEN))
    return run_settings(kafka_bootstrap, "reviewio", partitions=2).overriding(
        "review", tokens_file=tokens
    )


def import_file(settings: Settings, path: Path, **claims: Any) -> int:
    """``review import PATH`` (JSONL) with these settings."""
    return run_import(label_import_options(settings), path, "jsonl", **claims)


async def labels_on_topic(settings: Settings) -> list[tuple[bytes | None, LabelEvent]]:
    records = await read_topic(
        kafka_connection(settings), settings.review.labels_topic, timeout_s=30.0, max_bytes=1 << 20
    )
    return [(key, LabelEvent.model_validate_json(value)) for key, value in records]


async def test_imported_files_become_label_events_keyed_by_answer_id(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text(
        json.dumps(
            {
                "answer_id": "a-1",
                "labelled_at": "2026-12-01T09:00:00+01:00",
                "answer_label": "faithful",
                "claims": [{"index": 0, "label": "supported"}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    assert await asyncio.to_thread(import_file, settings, jsonl, **ANA) == 0
    assert capsys.readouterr().out.strip() == (
        f"published 1 labels to {settings.review.labels_topic}"
    )
    studio = read_labels(EXPORT / "label_studio_export.json", "label-studio")
    assert await publish_labels(label_import_options(settings), studio) == 3

    found = await labels_on_topic(settings)
    assert sorted(label.answer_id for _, label in found) == ["a-1", "ans-1", "ans-1", "ans-2"]
    assert all(key == label.answer_id.encode() for key, label in found)
    by_source = {label.source for _, label in found}
    assert by_source == {"import", "label-studio"}
    [imported] = [label for _, label in found if label.answer_id == "a-1"]
    assert (imported.reviewer, imported.tenant) == ("ana", "acme")
    # a re-import publishes the same label ids: the labels loop counts each once
    assert await asyncio.to_thread(import_file, settings, jsonl, **ANA) == 0
    again = [label for _, label in await labels_on_topic(settings) if label.answer_id == "a-1"]
    assert {label.label_id for label in again} == {imported.label_id}


async def test_an_import_without_a_token_does_not_attribute_labels_to_a_named_reviewer(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = tmp_path / "from-bob.jsonl"
    forged.write_text(
        json.dumps(
            {
                "answer_id": "a-9",
                "tenant": "acme",
                "reviewer": "bob",
                "labelled_at": "2026-12-01T09:00:00+00:00",
                "answer_label": "faithful",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    code = await asyncio.to_thread(
        import_file, settings, forged, reviewer=None, tenant=None, token=None
    )
    assert code == 0
    assert "no reviewer token" in capsys.readouterr().err
    [(key, published)] = await labels_on_topic(settings)
    assert key == b"a-9" and published.reviewer == "import:from-bob.jsonl"
    # Claiming bob's name on the command line without bob's token publishes nothing more.
    refused = await asyncio.to_thread(
        import_file, settings, forged, reviewer="bob", tenant=None, token=None
    )
    assert refused == 2 and len(await labels_on_topic(settings)) == 1


async def test_a_bad_file_publishes_nothing(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"answer_id": "a-1"}\n', encoding="utf-8")
    assert await asyncio.to_thread(import_file, settings, bad, **ANA) == 2
    assert "line 1:" in capsys.readouterr().err
    assert await labels_on_topic(settings) == []


async def test_review_items_and_labels_come_back_as_joined_rows(
    settings: Settings, tmp_path: Path
) -> None:
    await ensure_topics(
        settings.bootstrap_servers, review_topic_specs(topic_layout(settings)), settings.security
    )
    items = [review_item("r-1"), review_item("r-2", answer="Delivery takes two days.")]
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        transactional_id=f"{settings.app_id}-{uuid.uuid4().hex[:6]}",
        enable_idempotence=True,
    )
    await producer.start()
    try:
        async with producer.transaction():
            for item in items:
                await producer.send_and_wait(
                    settings.review.queue_topic,
                    key=item.answer_id.encode(),
                    value=item.model_dump_json().encode(),
                )
        await producer.begin_transaction()  # an aborted item is never exported
        aborted = review_item("r-3")
        await producer.send_and_wait(
            settings.review.queue_topic, key=b"r-3", value=aborted.model_dump_json().encode()
        )
        await producer.abort_transaction()
    finally:
        await producer.stop()
    published = [
        label("r-1", "ana", "hallucinated", {0: "contradicted", 1: "supported"}),
        label("r-1", "ben", "hallucinated", {0: "unsupported"}, minutes=3),
        label("r-2", "ana", "faithful", {0: "supported"}),
        label("r-3", "ana", "faithful"),
    ]
    assert await publish_labels(label_import_options(settings), published) == 4

    rows = await labelled_rows(label_export_options(settings), timeout_s=30.0)
    assert [row["id"] for row in rows] == ["r-1", "r-2"]
    first, second = rows
    assert first["response_label"] == "hallucinated" and second["response_label"] == "faithful"
    assert first["labels"] == [
        {
            "start": 0,
            "end": 33,
            "text": "The order 7 was shipped on 3 May.",
            "verdict": "contradicted",
        }
    ]
    assert first["meta"]["reviewers"] == ["ana", "ben"]
    assert first["meta"]["inclusion_probability"] == 1.0
    out = tmp_path / "review.jsonl"
    assert await asyncio.to_thread(run_export, label_export_options(settings), out) == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["r-1", "r-2"]
