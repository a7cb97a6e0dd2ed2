"""Kafka TLS and SASL from ``Settings.security``, in the shapes our two client stacks take.

Every Kafka client streamproc opens (admin, producers, tail consumers, the faust app) must
authenticate the same way, so the translation from settings lives here once:
``aiokafka_options`` gives keyword arguments for any aiokafka client, ``faust_options``
gives the ``broker_credentials`` keyword of ``faust.App``.

The password leaves its ``SecretStr`` only inside the returned mapping, whose ``repr``
masks it, so a logged options dict does not leak it.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka.helpers import create_ssl_context

from streamproc.config import KafkaSecurity

__all__ = ["ClientOptions", "aiokafka_options", "faust_options", "ssl_context"]

_MASK = "**********"
_SECRET_KEYS = frozenset({"sasl_plain_password"})


class ClientOptions(dict[str, Any]):
    """Client keyword arguments whose ``repr`` hides the SASL password."""

    def __repr__(self) -> str:
        shown = {key: _MASK if key in _SECRET_KEYS else value for key, value in self.items()}
        return f"{type(self).__name__}({shown!r})"

    __str__ = __repr__


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


def faust_options(security: KafkaSecurity) -> dict[str, Any]:
    """``faust.App`` keyword arguments: ``broker_credentials`` (empty for PLAINTEXT).

    faust derives the protocol from the credentials class: SASLCredentials with an SSL
    context is SASL_SSL, without one SASL_PLAINTEXT; SSLCredentials is SSL."""
    import faust  # the faust app is the only caller; keep the import off aiokafka users

    context = ssl_context(security)
    if _uses_sasl(security):
        username, password = _sasl_credentials(security)
        return {
            "broker_credentials": faust.SASLCredentials(
                username=username,
                password=password,
                ssl_context=context,
                mechanism=security.sasl_mechanism,
            )
        }
    if context is not None:
        return {"broker_credentials": faust.SSLCredentials(context)}
    return {}
