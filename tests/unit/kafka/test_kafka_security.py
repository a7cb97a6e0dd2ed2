"""Settings.security -> aiokafka keyword arguments."""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiokafka.protocol.admin import SaslAuthenticateRequest_v1

from streamproc.config import Settings
from streamproc.kafka.options import KafkaSecurity
from streamproc.kafka.security import aiokafka_options

PASSWORD = "s3cret-pa55word"


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway self-signed CA certificate (PEM)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    folder = tmp_path_factory.mktemp("ca")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=streamproc-unit-ca",
         "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return folder / "ca.pem"


def _security(**fields: Any) -> KafkaSecurity:
    return KafkaSecurity.model_validate(fields)


def test_plaintext_adds_nothing() -> None:
    assert aiokafka_options(KafkaSecurity()) == {}


def test_sasl_ssl_gives_every_option(ca_file: Path) -> None:
    security = _security(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password=PASSWORD,
        ssl_cafile=ca_file,
    )
    options = aiokafka_options(security)
    context = options.pop("ssl_context")
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
    }
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is True
    assert context.verify_mode == ssl.CERT_REQUIRED
    subjects = [ca["subject"] for ca in context.get_ca_certs()]
    assert subjects == [((("commonName", "streamproc-unit-ca"),),)]


def test_hostname_check_can_be_turned_off_but_not_verification(ca_file: Path) -> None:
    options = aiokafka_options(
        _security(protocol="SSL", ssl_cafile=ca_file, ssl_check_hostname=False)
    )
    assert set(options) == {"security_protocol", "ssl_context"}
    assert options["ssl_context"].check_hostname is False
    assert options["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_sasl_plaintext_has_no_tls() -> None:
    options = aiokafka_options(
        _security(protocol="SASL_PLAINTEXT", sasl_username="bob", sasl_password=PASSWORD)
    )
    assert options == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": PASSWORD,
    }


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_without_credentials_is_refused(protocol: str) -> None:
    with pytest.raises(ValueError, match="sasl_password"):
        aiokafka_options(_security(protocol=protocol, sasl_username="alice"))
    with pytest.raises(ValueError, match="sasl_username"):
        aiokafka_options(_security(protocol=protocol, sasl_password=PASSWORD))


def test_key_without_certificate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ssl_certfile"):
        aiokafka_options(_security(protocol="SSL", ssl_keyfile=tmp_path / "client.key"))


def test_password_never_shown(ca_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    security = _security(
        protocol="SASL_SSL", sasl_username="alice", sasl_password=PASSWORD, ssl_cafile=ca_file
    )
    options = aiokafka_options(security)
    logging.getLogger("streamproc.test").info("options %s %r", options, options)
    shown = [repr(options), str(options), f"{options}", repr(security)]
    assert "alice" in repr(options)
    assert all(PASSWORD not in text for text in shown)
    assert PASSWORD not in caplog.text
    assert options["sasl_plain_password"] == PASSWORD  # the client still gets it


def test_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_SECURITY__PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("STREAMPROC_SECURITY__SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("STREAMPROC_SECURITY__SASL_USERNAME", "alice")
    monkeypatch.setenv("STREAMPROC_SECURITY__SASL_PASSWORD", PASSWORD)
    options = aiokafka_options(Settings().security)
    assert options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert options["sasl_plain_password"] == PASSWORD


def test_sasl_plain_bytes_are_blanked_in_aiokafka_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiokafka logs each request at DEBUG; PLAIN's carries the password in clear."""
    aiokafka_options(
        _security(protocol="SASL_PLAINTEXT", sasl_username="alice", sasl_password=PASSWORD)
    )
    caplog.set_level(logging.DEBUG, logger="aiokafka.conn")
    request = SaslAuthenticateRequest_v1(f"\0alice\0{PASSWORD}".encode())
    conn_log = logging.getLogger("aiokafka.conn")
    conn_log.debug("Request to %s:%d %d: %s", "127.0.0.1", 9092, 3, request)
    conn_log.debug("Request to %s:%d %d: %s", "127.0.0.1", 9092, 4, "MetadataRequest_v5()")
    assert PASSWORD in repr(request)  # what would have been logged
    assert PASSWORD not in caplog.text
    assert "SaslAuthenticateRequest_v1(sasl_auth_bytes=<redacted>)" in caplog.text
    assert "MetadataRequest_v5()" in caplog.text
