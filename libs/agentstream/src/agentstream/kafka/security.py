"""TLS and SASL for every Kafka client we build, from the `kafka.*` settings.

`client_security` is the one translation: aiokafka keyword arguments (`security_protocol`,
`ssl_context`, `sasl_*`) for raw producers, consumers and the admin client.
`broker_security` wraps the same values in the `faststream.security` object that the
FastStream broker takes (FastStream turns it back into these keyword arguments).
The SASL password is read from its environment variable when a client is built, so it
never sits in the config file or in the settings object.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka.helpers import create_ssl_context

from agentstream.config import ConfigError, KafkaSettings, SaslMechanism, SecurityProtocol

if TYPE_CHECKING:
    from faststream.security import BaseSecurity


def client_security(kafka: KafkaSettings) -> dict[str, Any]:
    """aiokafka keyword arguments for `kafka.security_protocol`; `{}` for PLAINTEXT (aiokafka's
    own defaults). Raises `ConfigError` naming the key when a file or the password is missing."""
    protocol = kafka.security_protocol
    if protocol is SecurityProtocol.PLAINTEXT:
        return {}
    kwargs: dict[str, Any] = {"security_protocol": protocol.value}
    if protocol.uses_tls:
        kwargs["ssl_context"] = ssl_context(kafka)
    if protocol.uses_sasl:
        if kafka.sasl_mechanism is None or not kafka.sasl_username:  # settings built without validation
            raise ConfigError(
                f"kafka.security_protocol {protocol.value} needs kafka.sasl_mechanism and kafka.sasl_username"
            )
        kwargs["sasl_mechanism"] = kafka.sasl_mechanism.value
        kwargs["sasl_plain_username"] = kafka.sasl_username
        kwargs["sasl_plain_password"] = sasl_password(kafka)
    return kwargs


def broker_security(kafka: KafkaSettings) -> BaseSecurity | None:
    """The FastStream `security=` object carrying exactly `client_security(kafka)`."""
    # Imported here: FastStream is the services' (a plain client, `agentstream send`, needs none of it).
    from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

    kwargs = client_security(kafka)
    if not kwargs:
        return None
    context = kwargs.get("ssl_context")
    if "sasl_mechanism" not in kwargs:
        return BaseSecurity(ssl_context=context)
    security_class = {
        SaslMechanism.PLAIN: SASLPlaintext,
        SaslMechanism.SCRAM_SHA_256: SASLScram256,
        SaslMechanism.SCRAM_SHA_512: SASLScram512,
    }[SaslMechanism(kwargs["sasl_mechanism"])]
    return security_class(
        kwargs["sasl_plain_username"],
        kwargs["sasl_plain_password"],
        ssl_context=context,
        use_ssl=context is not None,
    )


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """Verifies the broker's certificate (system CAs unless `ssl_cafile`), optionally presents a
    client certificate (mTLS)."""
    files = {"ssl_cafile": kafka.ssl_cafile, "ssl_certfile": kafka.ssl_certfile, "ssl_keyfile": kafka.ssl_keyfile}
    for key, path in files.items():
        if path and not Path(path).is_file():
            raise ConfigError(f"kafka.{key}: file not found: {path}")
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=kafka.ssl_cafile, certfile=kafka.ssl_certfile, keyfile=kafka.ssl_keyfile
        )
    except ssl.SSLError as err:
        named = ", ".join(f"kafka.{k}" for k, v in files.items() if v) or "system CA store"
        raise ConfigError(f"{named}: not a usable certificate/key (PEM): {err}") from None
    # Off only for brokers reached by a name their certificate lacks; the chain is still verified.
    context.check_hostname = kafka.ssl_check_hostname
    return context


def sasl_password(kafka: KafkaSettings) -> str:
    env = kafka.sasl_password_env
    value = os.environ.get(env) if env else None
    if not value:
        raise ConfigError(
            f"kafka.sasl_password_env: environment variable {env} is not set or empty (it holds the SASL password)"
        )
    return value
