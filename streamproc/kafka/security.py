"""Kafka TLS and SASL from ``Settings.security``, as aiokafka client keyword arguments.

Every Kafka client streamproc opens (admin, the worker's consumers and producers, tail
consumers, the CLI tools) must authenticate the same way, so the translation from
settings lives here once: ``aiokafka_options``.

The password leaves its ``SecretStr`` only inside the returned mapping, whose ``repr``
masks it, so a logged options dict does not leak it. aiokafka logs every request at DEBUG,
SASL PLAIN's (the password in clear) included; asking for SASL options therefore also
installs a filter on aiokafka's connection logger that blanks SASL authentication bytes.

aiokafka reports refused credentials as "Unable to bootstrap", like a broker that is down
(the reason only goes to its log), and callers retry that. ``explain_access_errors``
turns it into ``BrokerAccessDenied``, which names the reason and is not worth retrying.
A broker that never answers at start-up becomes ``BrokerUnreachable``: the worker, the
gate and the audit sink log it in one line and exit with ``EXIT_BROKER_UNREACHABLE``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka.conn import create_conn
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context

from streamproc.kafka.options import KafkaSecurity

__all__ = [
    "EXIT_BROKER_UNREACHABLE",
    "BrokerAccessDenied",
    "BrokerUnreachable",
    "ClientOptions",
    "access_denial",
    "aiokafka_options",
    "explain_access_errors",
    "socket_error",
    "ssl_context",
]

_MASK = "**********"
_SECRET_KEYS = frozenset({"sasl_plain_password"})


class ClientOptions(dict[str, Any]):
    """Client keyword arguments whose ``repr`` hides the SASL password."""

    def __repr__(self) -> str:
        shown = {key: _MASK if key in _SECRET_KEYS else value for key, value in self.items()}
        return f"{type(self).__name__}({shown!r})"

    __str__ = __repr__


class _RedactSaslAuthBytes(logging.Filter):
    """Replaces the SaslAuthenticate request/response structs in aiokafka's DEBUG lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(_is_sasl_auth(arg) for arg in args):
            record.args = tuple(
                f"{type(arg).__name__}(sasl_auth_bytes=<redacted>)" if _is_sasl_auth(arg) else arg
                for arg in args
            )
        return True


def _is_sasl_auth(value: object) -> bool:
    return type(value).__name__.startswith("SaslAuthenticate")


_REDACT_SASL = _RedactSaslAuthBytes()


def _redact_sasl_in_logs() -> None:
    """Idempotent: the filter is installed once, on the logger that writes the requests."""
    logger = logging.getLogger("aiokafka.conn")
    if _REDACT_SASL not in logger.filters:
        logger.addFilter(_REDACT_SASL)


def _uses_tls(security: KafkaSecurity) -> bool:
    return security.protocol in ("SSL", "SASL_SSL")


def _uses_sasl(security: KafkaSecurity) -> bool:
    return security.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def ssl_context(security: KafkaSecurity) -> ssl.SSLContext | None:
    """The client TLS context for SSL / SASL_SSL, or None for the plaintext protocols.

    No CA file means the system trust store; a client certificate turns on mutual TLS."""
    if not _uses_tls(security):
        return None
    if security.ssl_keyfile is not None and security.ssl_certfile is None:
        raise ValueError("security.ssl_keyfile is set but security.ssl_certfile is not")
    context: ssl.SSLContext = create_ssl_context(
        cafile=security.ssl_cafile,
        certfile=security.ssl_certfile,
        keyfile=security.ssl_keyfile,
    )
    # The certificate is still verified against the CA; only the name check goes.
    context.check_hostname = security.ssl_check_hostname
    return context


def _sasl_credentials(security: KafkaSecurity) -> tuple[str, str]:
    if not security.sasl_username or security.sasl_password is None:
        raise ValueError(
            f"security.protocol={security.protocol} needs security.sasl_username and "
            "security.sasl_password"
        )
    _redact_sasl_in_logs()
    return security.sasl_username, security.sasl_password.get_secret_value()


def aiokafka_options(security: KafkaSecurity) -> ClientOptions:
    """Keyword arguments for AIOKafkaConsumer, AIOKafkaProducer and AIOKafkaAdminClient.

    PLAINTEXT gives an empty mapping, so callers can always spread it with ``**``."""
    options = ClientOptions()
    if security.protocol == "PLAINTEXT":
        return options
    options["security_protocol"] = security.protocol
    if _uses_sasl(security):
        username, password = _sasl_credentials(security)
        options["sasl_mechanism"] = security.sasl_mechanism
        options["sasl_plain_username"] = username
        options["sasl_plain_password"] = password
    if _uses_tls(security):
        options["ssl_context"] = ssl_context(security)
    return options


class BrokerAccessDenied(Exception):
    """The broker refused our credentials or our TLS handshake. Deliberately not a
    KafkaError or OSError: it will not go away by retrying, so retry loops let it through."""


EXIT_BROKER_UNREACHABLE = 8
"""The exit code of a worker, gate or audit sink that gave up waiting for the broker."""


class BrokerUnreachable(Exception):
    """No broker answered within ``broker_connect_timeout_s`` at start-up: where we looked,
    how, for how long, and why (the socket's reason when there is one, else the client's
    last error). ``str()`` is the one line; :attr:`fields` the same as log fields."""

    def __init__(
        self,
        bootstrap_servers: str,
        security: KafkaSecurity,
        waited_s: float,
        last: BaseException,
        reason: str | None = None,
    ) -> None:
        text = str(last)
        if not text.startswith(type(last).__name__):
            text = f"{type(last).__name__}: {text}"
        self.fields: dict[str, object] = {
            "bootstrap_servers": bootstrap_servers,
            "security_protocol": security.protocol,
            "waited_s": round(waited_s, 1),
            "reason": reason or text,
            "setting": "STREAMPROC_BROKER_CONNECT_TIMEOUT_S",
        }
        super().__init__(
            f"no Kafka broker answered at {bootstrap_servers} ({security.protocol}) within "
            f"{waited_s:.0f} s (STREAMPROC_BROKER_CONNECT_TIMEOUT_S): {reason or text}"
        )


async def socket_error(bootstrap_servers: str, timeout_s: float = 2.0) -> str | None:
    """Why a plain TCP connection to the first bootstrap broker fails (refused, no route,
    unknown host, timed out), or None when it connects: the reason aiokafka only logs."""
    address = next(filter(None, (part.strip() for part in bootstrap_servers.split(","))), "")
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port)), timeout_s
        )
    except TimeoutError:
        return f"{address}: no answer to a TCP connect within {timeout_s:g} s"
    except (OSError, ValueError) as exc:
        return f"{address}: {exc}"
    writer.close()
    return None


# ssl.SSLError is an OSError, so it is tested before the "unreachable" errors below.
_DENIALS = (SaslAuthenticationFailed, UnsupportedSaslMechanismError, ssl.SSLError)


async def access_denial(
    bootstrap_servers: str, security: KafkaSecurity, timeout_s: float = 10.0
) -> BrokerAccessDenied | None:
    """Connect once to each bootstrap broker with these settings: the first refusal of the
    credentials or the certificate, or None when none refused (down, or fine)."""
    options = aiokafka_options(security)
    for address in filter(None, (part.strip() for part in bootstrap_servers.split(","))):
        host, _, port = address.rpartition(":")
        try:
            conn = await asyncio.wait_for(
                create_conn(
                    host.strip("[]"), int(port), request_timeout_ms=int(timeout_s * 1000), **options
                ),
                timeout_s,
            )
        except _DENIALS as exc:
            who = (
                f" as {security.sasl_username!r} with {security.sasl_mechanism}"
                if security.protocol.startswith("SASL")
                else ""
            )
            return BrokerAccessDenied(
                f"Kafka broker {address} refused the {security.protocol} connection{who}: "
                f"{type(exc).__name__}: {exc}"
            )
        except (OSError, KafkaError, TimeoutError, ValueError):
            continue
        conn.close()
    return None


@asynccontextmanager
async def explain_access_errors(
    bootstrap_servers: str, security: KafkaSecurity
) -> AsyncIterator[None]:
    """Around a client's ``start()``: a failed bootstrap that was really a refusal of our
    credentials or certificate becomes ``BrokerAccessDenied``; anything else is re-raised."""
    try:
        yield
    except KafkaConnectionError as exc:
        denial = await access_denial(bootstrap_servers, security)
        if denial is not None:
            raise denial from exc
        raise
