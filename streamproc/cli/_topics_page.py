"""``docs/reference/topics.md``: every topic streamproc reads or writes, from the topic
catalog (:mod:`streamproc.kafka.topics`): its name and the variable that sets it, its key and
value (:class:`~streamproc.verdicts.catalog.OutputTopics`, and the AsyncAPI contract for what
streamproc only reads), its partitions and configuration, and who writes and reads it
(:data:`_FLOWS`, the one part written by hand: a topic missing there fails the generator,
and so the page's test).

Which variable sets a topic's name or a configuration value is found by changing each
variable in turn and seeing what moves, so a new topic setting needs no table here.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, get_args, get_type_hints

from pydantic import BaseModel

from streamproc.cli._markdown import GENERATED, anchor, code, md_cell
from streamproc.cli.settings import PREFIX
from streamproc.config import Settings, setting_variables

__all__ = ["render_topics_page"]


_Flow = tuple[str, str]

_FLOWS: dict[str, _Flow] = {
    "<STREAMPROC_TOPICS__ANSWERS>": (
        "the assistants (any producer); `streamproc demo` its sample answers",
        "the worker's judging loop (group `{app}.judge`)",
    ),
    "<STREAMPROC_TOPICS__VERDICTS>": (
        "the worker's judging loop; `streamproc gate serve` for the answers it gates",
        "products and auditors (any consumer, read_committed)",
    ),
    "<STREAMPROC_TOPICS__FLAGS>": (
        "the worker's judging loop; `streamproc gate serve` for the answers it gates",
        "products and on-call (any consumer, read_committed)",
    ),
    "<STREAMPROC_TOPICS__OUTCOMES>": (
        "the worker's judging loop; `streamproc gate serve` for the answers it gates",
        "the worker's window loop (group `{app}.windows`)",
    ),
    "<STREAMPROC_TOPICS__AGGREGATES>": (
        "the worker's window loop",
        "dashboards (any consumer, read_committed)",
    ),
    "<STREAMPROC_WINDOW__HOPPING_TOPIC>": (
        "the worker's window loop",
        "dashboards (any consumer, read_committed)",
    ),
    "<STREAMPROC_WINDOW__LATE_TOPIC>": (
        "the worker's window loop",
        "whoever replays or corrects windows (any consumer)",
    ),
    "<STREAMPROC_ALERTS__TOPIC>": (
        "the worker's window loop (rate alerts) and accuracy loop (judge_drift alerts)",
        "alerting (any consumer, read_committed)",
    ),
    "<STREAMPROC_APP_ID>.window-state-changelog": (
        "the worker's window loop (its state)",
        "the worker's window loop, restoring its partitions' state",
    ),
    "<STREAMPROC_APP_ID>.judge-dedup-changelog": (
        "the worker's judging loop (the (tenant, event_id) marks)",
        "the worker's judging loop, restoring its partitions' marks",
    ),
    "<STREAMPROC_AUDIT__TOPIC>": (
        "the worker's judging loop and `streamproc gate serve` (a record per answer), the "
        "labels loop (accepted labels), `streamproc audit purge` (tombstones)",
        "`streamproc audit-sink` (group `{app}.audit-sink`)",
    ),
    "<STREAMPROC_REVIEW__QUEUE_TOPIC>": (
        "the worker's judging loop; `streamproc gate serve` for the answers it gates",
        "`streamproc review serve` (group `{app}.review-page`), the worker's labels loop "
        "(group `{app}.labels`), `streamproc review export` (no group)",
    ),
    "<STREAMPROC_REVIEW__LABELS_TOPIC>": (
        "`streamproc review serve`, `streamproc review import`, any producer",
        "the worker's labels loop (group `{app}.labels`), `streamproc review export` (no group)",
    ),
    "<STREAMPROC_LABELS__DELTAS_TOPIC>": (
        "the worker's labels loop",
        "the worker's accuracy loop (group `{app}.accuracy`)",
    ),
    "<STREAMPROC_LABELS__ACCURACY_TOPIC>": (
        "the worker's accuracy loop",
        "the worker's window loop (every partition, no group: the live accuracy table); dashboards",
    ),
    "<STREAMPROC_APP_ID>.labels-state-changelog": (
        "the worker's labels loop (review items waiting for labels)",
        "the worker's labels loop, restoring its partitions' state",
    ),
    "<STREAMPROC_APP_ID>.accuracy-state-changelog": (
        "the worker's accuracy loop (tallies per cell)",
        "the worker's accuracy loop, restoring its partitions' state",
    ),
    "<STREAMPROC_GATE__REQUESTS_TOPIC>": (
        "the gate's callers (the Python gate client, or any producer)",
        "`streamproc gate serve` (group `{app}.gate`)",
    ),
    "<STREAMPROC_GATE__REPLIES_TOPIC>": (
        "`streamproc gate serve` (the default reply topic; a request may name its own)",
        "the caller that sent the request (read_committed)",
    ),
    "<STREAMPROC_TOPICS__DEAD_LETTER>": (
        "the worker's judging, labels and accuracy loops; `streamproc gate serve`",
        "whoever replays or inspects rejected input (any consumer)",
    ),
    "<STREAMPROC_AUDIT__CHECKPOINT_TOPIC>": (
        "`streamproc audit-sink`, `streamproc audit purge`",
        "`streamproc audit-sink` at start-up, `streamproc audit verify --topic-checkpoints`, "
        "`streamproc audit checkpoints --topic` (no group)",
    ),
}
"""Who writes and who reads each topic, by the variable (and suffix) its name comes from."""

_STATE = ("the state's key, as the loop's store encodes it", "the loop's state (internal)")
_UNCATALOGUED: dict[str, tuple[str, str]] = {
    "<STREAMPROC_APP_ID>.judge-dedup-changelog": _STATE,
    "<STREAMPROC_AUDIT__CHECKPOINT_TOPIC>": (
        "`checkpoint:<partition>`",
        "a signed chain head (JSON), as `streamproc audit checkpoints` prints it",
    ),
}
"""Key and value of the topics no output catalog or contract describes."""

_KEY_NOTES = {"original_key": "the original record's key"}
"""Keys a placeholder model cannot show (the dead letter's is the original's bytes)."""


@dataclass(frozen=True, slots=True)
class _Message:
    model: str
    schema: str | None
    """The file under ``schemas/``."""
    key: str


@dataclass(frozen=True, slots=True)
class _Topic:
    name: str
    origin: str
    """``<STREAMPROC_TOPICS__VERDICTS>``: where the name comes from."""
    partitions: str
    replication: str
    config: list[tuple[str, str]]
    messages: list[_Message]
    flow: _Flow


def render_topics_page(settings: Settings | None = None) -> str:
    """``docs/reference/topics.md``: the settings' defaults, never the environment's."""
    settings = settings or Settings.model_construct()
    topics = _topics(settings)
    lines = [
        "# Topics",
        "",
        GENERATED.format(
            source="the topic catalog (streamproc/kafka/topics.py, "
            "streamproc/verdicts/catalog.py, schemas/asyncapi.yaml)"
        ),
        "",
        "Every topic streamproc reads or writes, under its default name, with the variable "
        "that names it. Topics are created at start-up (never by the broker) with the "
        "partitions and configuration below; an existing topic is left as it is. Values "
        "are JSON, described by the files in [schemas/](../../schemas/) (generated from "
        "the same models); every record written for an answer carries a W3C `traceparent` "
        "header. Variables: [settings.md](settings.md).",
        "",
        "| Topic | Name | Key | Value |",
        "| --- | --- | --- | --- |",
    ]
    for topic in topics:
        keys = ", ".join(dict.fromkeys(message.key for message in topic.messages))
        values = ", ".join(_value(message) for message in topic.messages)
        cells = [f"[{code(topic.name)}](#{anchor(topic.name)})", _origin(topic.origin)]
        lines.append("| " + " | ".join([cells[0], *map(md_cell, [cells[1], keys, values])]) + " |")
    for topic in topics:
        lines += ["", f"## {topic.name}", ""]
        lines.append(f"- Name: {code(topic.name)}, set by {_origin(topic.origin)}")
        for message in topic.messages:
            lines.append(f"- Value: {_value(message)}; key: {message.key}")
        lines.append(f"- Partitions: {topic.partitions}; replication factor {topic.replication}")
        lines += [f"- {code(name)}: {value}" for name, value in topic.config]
        writers, readers = topic.flow
        app = settings.app_id
        lines.append(f"- Written by {writers.format(app=app)}")
        lines.append(f"- Read by {readers.format(app=app)}")
    return "\n".join(lines) + "\n"


def _origin(origin: str) -> str:
    """``<STREAMPROC_APP_ID>.labels-state-changelog`` as ``STREAMPROC_APP_ID`` + suffix."""
    parts = [part for part in re.split(r"<(\w+)>", origin) if part]
    return " + ".join(map(code, parts))


def _value(message: _Message) -> str:
    if message.schema is None:
        return message.model
    return f"{code(message.model)} ([{message.schema}](../../schemas/{message.schema}))"


def _topics(settings: Settings) -> list[_Topic]:
    specs = _specs(settings)
    moved = _what_moves(settings, specs)
    messages = _messages(settings)
    values = {variable: value for variable, _, value in _leaves(settings)}
    topics = []
    for index, spec in enumerate(specs):
        origin = _name_origin(spec.name, moved.get((index, "name"), []), values)
        if origin not in _FLOWS:
            raise KeyError(
                f"topic {spec.name} ({origin}): say who writes and reads it in "
                "streamproc/cli/reference.py _FLOWS"
            )
        found = messages.get(spec.name) or _uncatalogued(spec.name, origin)
        config = [
            (name, _config_value(name, value, moved.get((index, name), [])))
            for name, value in spec.config.items()
        ]
        for absent in ("cleanup.policy", "retention.ms"):
            if absent not in spec.config:
                config.append((absent, "the broker's default"))
        topics.append(
            _Topic(
                spec.name,
                origin,
                _with_variables(str(spec.partitions), moved.get((index, "partitions"), [])),
                _with_variables(str(spec.replication_factor), moved.get((index, "replicas"), [])),
                sorted(config),
                found,
                _FLOWS[origin],
            )
        )
    return topics


def _specs(settings: Settings) -> list[Any]:
    """Every topic of the catalog, each once: the worker's, then the audit sink's."""
    from streamproc.kafka.topics import (
        audit_checkpoint_topic_spec,
        audit_topic_spec,
        gate_topic_specs,
        review_topic_specs,
        topic_specs,
    )
    from streamproc.wiring import topic_layout

    layout = topic_layout(settings)
    every = [
        *topic_specs(layout),
        audit_topic_spec(layout),
        *review_topic_specs(layout),
        *gate_topic_specs(layout),
        audit_checkpoint_topic_spec(layout),
    ]
    return list({spec.name: spec for spec in reversed(every)}.values())[::-1]


def _leaves(settings: Settings) -> Iterator[tuple[str, list[str], str | int]]:
    """(variable, path, value) of every variable that names or sizes something."""
    for each in setting_variables():
        if each.kind != "value":
            continue
        path = each.name.removeprefix(PREFIX).lower().split("__")
        value: object = settings
        for part in path:
            value = getattr(value, part)
        if isinstance(value, str | int) and not isinstance(value, bool):
            yield each.name, path, value


def _replaced(model: BaseModel, path: list[str], value: object) -> Any:
    if len(path) == 1:
        return model.model_copy(update={path[0]: value})
    inner = getattr(model, path[0])
    return model.model_copy(update={path[0]: _replaced(inner, path[1:], value)})


def _what_moves(settings: Settings, specs: list[Any]) -> dict[tuple[int, str], list[str]]:
    """(topic index, "name" | "partitions" | "replicas" | config name) -> the variables
    whose change changes it."""
    moved: dict[tuple[int, str], list[str]] = {}
    for name, path, value in _leaves(settings):
        changed = value + "-x" if isinstance(value, str) else value + 1
        other = _specs(_replaced(settings, path, changed))
        if len(other) != len(specs):
            continue
        for index, (before, after) in enumerate(zip(specs, other, strict=True)):
            facets = {
                "name": (before.name, after.name),
                "partitions": (before.partitions, after.partitions),
                "replicas": (before.replication_factor, after.replication_factor),
                **{key: (before.config.get(key), after.config.get(key)) for key in before.config},
            }
            for facet, (was, now) in facets.items():
                if was != now:
                    moved.setdefault((index, facet), []).append(name)
    return moved


def _name_origin(name: str, variables: list[str], values: dict[str, str | int]) -> str:
    """``<VARIABLE>`` in place of the variable's value within ``name``."""
    for variable in variables:
        value = str(values[variable])
        if value and value in name:
            return name.replace(value, f"<{variable}>", 1)
    return name


def _with_variables(value: str, variables: list[str]) -> str:
    return f"{value} ({', '.join(map(code, variables))})" if variables else value


_DAY_MS, _HOUR_MS = 86_400_000, 3_600_000


def _config_value(name: str, value: str, variables: list[str]) -> str:
    shown = code(value)
    if name.endswith(".ms") and value.isdigit() and int(value) > 0:
        ms = int(value)
        if ms % _DAY_MS == 0:
            shown += f" ({_count(ms // _DAY_MS, 'day')})"
        elif ms % _HOUR_MS == 0:
            shown += f" ({_count(ms // _HOUR_MS, 'hour')})"
    elif name == "max.message.bytes" and value.isdigit() and int(value) % 1024 == 0:
        kib = int(value) // 1024
        shown += f" ({kib // 1024} MiB)" if kib % 1024 == 0 else f" ({kib} KiB)"
    if variables:
        shown += f", from {', '.join(map(code, variables))}"
    return shown


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"


def _uncatalogued(name: str, origin: str) -> list[_Message]:
    if origin not in _UNCATALOGUED:
        raise KeyError(
            f"topic {name} ({origin}): no output topic, contract or note gives its key and "
            "value (streamproc/cli/reference.py _UNCATALOGUED)"
        )
    key, value = _UNCATALOGUED[origin]
    return [_Message(value, None, key)]


def _messages(settings: Settings) -> dict[str, list[_Message]]:
    """Topic name -> what travels on it: the output catalog's topics (key shown by
    calling its key function on a placeholder), then the AsyncAPI contract's channels for
    the topics streamproc reads only."""
    from streamproc.contracts.schema_files import SCHEMA_MODELS
    from streamproc.review.labels.accuracy_loop import drift_alert_topic
    from streamproc.verdicts.catalog import OutputTopics
    from streamproc.wiring import output_topics

    files = {model: f"{name}.schema.json" for name, model in SCHEMA_MODELS.items()}
    outputs = output_topics(settings)
    hints = get_type_hints(OutputTopics)
    found: list[tuple[Any, Any]] = [
        (getattr(outputs, name), get_args(hints[name])[0]) for name in OutputTopics.__slots__
    ]
    found.append(
        (drift_alert_topic(outputs), get_args(get_type_hints(drift_alert_topic)["return"])[0])
    )
    messages: dict[str, list[_Message]] = {}
    for topic, model in found:
        if topic.key is None or not isinstance(model, type):
            message = _Message(_STATE[1], None, _STATE[0])
        else:
            message = _Message(model.__name__, files.get(model), _key_of(topic.key, model))
        if message not in messages.setdefault(topic.name, []):
            messages[topic.name].append(message)
    for address, contracted in _contract(settings).items():
        messages.setdefault(address, contracted)
    return messages


class _Placeholder(str):
    """A field's value in a key: ``<answer_id>``."""


class _Proxy:
    """A stand-in for a model that answers each field with its placeholder, and a nested
    model's field with a proxy of that model, so a key function shows the key it makes."""

    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        static = inspect.getattr_static(self._model, name, None)
        if isinstance(static, property) and static.fget is not None:
            return static.fget(self)
        field = self._model.model_fields.get(name)
        if field is None:
            raise AttributeError(name)
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            return _Proxy(field.annotation)
        return _Placeholder(f"<{name}>")


def _key_of(key: Callable[[Any], bytes | None], model: type[BaseModel]) -> str:
    try:
        made = key(_Proxy(model))
    except Exception:  # noqa: BLE001 - a key that needs real bytes: named by hand
        return _KEY_NOTES[key.__name__]
    return code(made.decode()) if made is not None else "none"


def _contract(settings: Settings) -> dict[str, list[_Message]]:
    """The AsyncAPI document's channels: address -> message, schema file and key."""
    from streamproc.contracts.asyncapi import render_asyncapi
    from streamproc.wiring import topic_names

    text = render_asyncapi(topic_names(settings))
    document = json.loads(text[text.index("{") :])
    components = document["components"]["messages"]
    contracted: dict[str, list[_Message]] = {}
    for channel in document["channels"].values():
        if "kafka" not in json.dumps(channel.get("servers", [])):
            continue  # the gate's WebSocket: not a topic
        for ref in channel["messages"].values():
            message = components[ref["$ref"].rsplit("/", 1)[1]]
            key = message["bindings"]["kafka"]["key"]["description"]
            key = key.removeprefix("The record key: ").removesuffix(".")
            contracted.setdefault(channel["address"], []).append(
                _Message(
                    message["name"],
                    message["payload"]["$ref"],
                    key if " " in key else code(key),
                )
            )
    return contracted
