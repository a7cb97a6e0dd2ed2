"""A real PostgreSQL server for the integration tests, started and stopped like Kafka.

``postgres_server`` runs ``initdb`` + ``pg_ctl`` (PostgreSQL 15 from Debian's
``postgresql`` package: ``/usr/local/bin`` links or ``/usr/lib/postgresql/*/bin``) in a
throwaway data directory on a free port, trusting local connections, with durability
turned off (tests need speed, not crash safety). PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` system user (created if missing) and its
directory is handed to that user. When no server binaries are found and the session runs
as root with ``apt-get``, Debian's ``postgresql`` package is installed first; otherwise
the tests that need it are skipped with the reason.

``postgres_database`` gives each test an empty database of its own on that server.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "postgres_database", "postgres_server"]

_SUPERUSER = "postgres"
_OS_USER = "postgres"
_START_TIMEOUT_S = 60
_INSTALL_TIMEOUT_S = 600


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    data_dir: Path
    user: str = _SUPERUSER

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL (psycopg 3 driver) of one database on this server."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        dsn = f"host={self.host} port={self.port} user={self.user} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _bin_dir() -> Path | None:
    candidates = [Path("/usr/local/bin")]
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(found).resolve().parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _install_or_skip() -> Path:
    folder = _bin_dir()
    if folder is not None:
        return folder
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) and cannot install them")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "postgresql"]):
        subprocess.run(
            command, env=env, check=True, capture_output=True, timeout=_INSTALL_TIMEOUT_S
        )
    folder = _bin_dir()
    if folder is None:
        pytest.fail("apt-get installed postgresql but no initdb/pg_ctl was found", pytrace=False)
    return folder


def _run_as() -> list[str]:
    """The prefix that runs a command as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(_OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _OS_USER],
            check=True,
            capture_output=True,
        )
    runner = shutil.which("runuser")
    if runner is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
    return [runner, "-u", _OS_USER, "--"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session, on 127.0.0.1 and a free port."""
    folder = _install_or_skip()
    prefix = _run_as()
    # Not under pytest's tmp dir: that one is private to root, and the server runs as
    # the postgres user when we are root.
    root = Path(tempfile.mkdtemp(prefix="streamproc-pg-"))
    data = root / "data"
    if prefix:
        user = pwd.getpwnam(_OS_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
    initdb = _run(
        [
            *prefix,
            str(folder / "initdb"),
            "-D",
            str(data),
            "-U",
            _SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        120,
    )
    if initdb.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}", pytrace=False)
    port = _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    pg_ctl = str(folder / "pg_ctl")
    started = _run(
        [
            *prefix,
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            str(_START_TIMEOUT_S),
            "start",
        ],
        _START_TIMEOUT_S + 10,
    )
    if started.returncode != 0:
        log = (
            (root / "server.log").read_text(errors="replace")
            if (root / "server.log").exists()
            else ""
        )
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"pg_ctl start failed:\n{started.stderr}\n{log}", pytrace=False)
    try:
        yield PostgresServer("127.0.0.1", port, data)
    finally:
        _run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], 60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def postgres_database(postgres_server: PostgresServer) -> str:
    """The SQLAlchemy URL of a new, empty database for one test."""
    return postgres_server.create_database()
