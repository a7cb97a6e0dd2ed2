"""The gate process starts its parts in order and stops cleanly on SIGTERM. The HTTP
server and metrics are stand-ins here (their own tests cover them); publish off needs
no broker."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import types
from typing import Any

import pytest

from streamproc.cli.gate_process import run_gate
from streamproc.config import Settings
from streamproc.gate.options import GateSettings
from streamproc.gate.service import GateService
from streamproc.inference.options import JudgeSettings

EVENTS: list[str] = []


class FakeMetrics:
    def __init__(self, gate: GateSettings) -> None:
        del gate

    def decided(self, reply: Any, *, path: str) -> None: ...

    def pending(self, count: int) -> None: ...

    def judged(self, batch_size: int, judge_ms: float) -> None: ...


class FakeServer:
    def __init__(
        self, gate: GateSettings, service: GateService, *, sensor: Any, outbox: Any
    ) -> None:
        self.service = service
        self.outbox = outbox

    async def start(self) -> None:
        assert self.service.ready(), "the judge is ready before anything listens"
        EVENTS.append(f"server-start outbox={self.outbox is not None}")

    async def stop(self) -> None:
        EVENTS.append(f"server-stop ready={self.service.ready()}")


def fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **members: object) -> None:
    parts = name.split(".")
    for depth in range(2, len(parts)):
        parent = ".".join(parts[:depth])
        if parent not in sys.modules:
            monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    module = types.ModuleType(name)
    for key, value in members.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


async def test_publish_off_serves_http_only_and_stops_on_sigterm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    EVENTS.clear()
    fake_module(monkeypatch, "streamproc.gate.http.server", GateServer=FakeServer)
    fake_module(monkeypatch, "streamproc.gate.metrics", GateMetrics=FakeMetrics)
    settings = Settings(judge=JudgeSettings(name="rules"), gate=GateSettings(publish=False, port=0))
    running = asyncio.create_task(run_gate(settings))
    for _ in range(500):
        if EVENTS:
            break
        await asyncio.sleep(0.01)
    assert EVENTS == ["server-start outbox=False"]
    os.kill(os.getpid(), signal.SIGTERM)
    code = await asyncio.wait_for(running, timeout=10)
    assert code == 0
    assert EVENTS == ["server-start outbox=False", "server-stop ready=True"]
