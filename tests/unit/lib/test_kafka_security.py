"""Kafka TLS/SASL settings reach every client: the FastStream broker, the admin client, the CLI's
raw producer and consumer. No broker needed: the clients are built, not started."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from faststream.kafka.security import parse_security
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

from agentstream.config import ConfigError, KafkaSettings, load_settings
from agentstream.kafka import make_broker
from agentstream.kafka.security import broker_security, client_security
from agentstream.kafka.topics import admin_client
from agentstream_stack.run_follower import RunFollower

PASSWORD_ENV = "TEST_KAFKA_PASSWORD"
SECRET = "pa55-w0rd"


@pytest.fixture(autouse=True)
def password(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("AGENTSTREAM"):
            monkeypatch.delenv(name)  # only what a test sets reaches load_settings
    monkeypatch.setenv(PASSWORD_ENV, SECRET)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-signed certificate for `localhost` only (also the CA and the client certificate)."""
    d = tmp_path_factory.mktemp("pki")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            d / "key.pem",
            "-out",
            d / "cert.pem",
        ],
        check=True,
        capture_output=True,
    )
    return {"cert": d / "cert.pem", "key": d / "key.pem"}


def sasl(protocol: str, mechanism: str, **more: Any) -> KafkaSettings:
    return KafkaSettings(
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username="svc",
        sasl_password_env=PASSWORD_ENV,
        **more,
    )


def without_context(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Each call builds its own SSLContext; compare everything else, and that a context is there."""
    out = dict(kwargs)
    if "ssl_context" in out:
        out["ssl_context"] = type(out["ssl_context"]).__name__
    return out


# -- the translation, protocol by protocol ------------------------------------------------------


def test_plaintext_default_changes_nothing() -> None:
    kafka = KafkaSettings()
    assert kafka.security_protocol == "PLAINTEXT"
    assert client_security(kafka) == {}
    assert broker_security(kafka) is None
    broker = make_broker(kafka)
    for key in ("security_protocol", "ssl_context", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password"):
        assert key not in broker._connection_kwargs
        assert key not in broker.config.broker_config.builder.keywords


def test_ssl_verifies_the_broker_with_system_cas_and_checks_the_host_name() -> None:
    kwargs = client_security(KafkaSettings(security_protocol="SSL"))
    assert set(kwargs) == {"security_protocol", "ssl_context"}
    assert kwargs["security_protocol"] == "SSL"
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname is True
    security = broker_security(KafkaSettings(security_protocol="SSL"))
    assert type(security) is BaseSecurity and security.use_ssl and security.ssl_context is not None


def test_ssl_cafile_is_the_trust_anchor(pki: dict[str, Path]) -> None:
    context = client_security(KafkaSettings(security_protocol="SSL", ssl_cafile=str(pki["cert"])))["ssl_context"]
    assert [dict(x[0] for x in c["subject"])["commonName"] for c in context.get_ca_certs()] == ["localhost"]
    unchecked = KafkaSettings(security_protocol="SSL", ssl_check_hostname=False)
    context = client_security(unchecked)["ssl_context"]
    assert context.check_hostname is False and context.verify_mode == ssl.CERT_REQUIRED  # chain still verified


@pytest.mark.parametrize(
    ("mechanism", "security_class"),
    [("PLAIN", SASLPlaintext), ("SCRAM-SHA-256", SASLScram256), ("SCRAM-SHA-512", SASLScram512)],
)
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_kwargs_and_broker_security(protocol: str, mechanism: str, security_class: type) -> None:
    kafka = sasl(protocol, mechanism)
    expected = {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "svc",
        "sasl_plain_password": SECRET,
    }
    if protocol == "SASL_SSL":
        expected["ssl_context"] = "SSLContext"
    assert without_context(client_security(kafka)) == expected

    security = broker_security(kafka)
    assert type(security) is security_class
    assert (security.username, security.password) == ("svc", SECRET)
    assert security.use_ssl is (protocol == "SASL_SSL")
    # FastStream turns the object back into exactly these aiokafka arguments...
    parsed = {k: v for k, v in parse_security(security).items() if not (k == "ssl_context" and v is None)}
    assert without_context(parsed) == expected
    # ...and gives them to its producer and to every consumer it builds.
    broker = make_broker(kafka)
    consumer_kwargs = broker.config.broker_config.builder.keywords
    for key, value in expected.items():
        assert without_context({key: broker._connection_kwargs[key]}) == {key: value}
        assert without_context({key: consumer_kwargs[key]}) == {key: value}


async def test_raw_clients_use_the_same_settings(pki: dict[str, Path]) -> None:
    kafka = sasl("SASL_SSL", "SCRAM-SHA-512", ssl_cafile=str(pki["cert"]))
    follower = RunFollower(kafka)
    clients = {
        "admin": admin_client(kafka)._client,
        "producer": follower._producer.client,
        "consumer": follower._consumer._client,
    }
    for name, client in clients.items():
        assert (client._security_protocol, client._sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512"), name
        assert (client._sasl_plain_username, client._sasl_plain_password) == ("svc", SECRET), name
        assert client._ssl_context.get_ca_certs(), name
    plain = RunFollower(KafkaSettings())
    assert plain._producer.client._security_protocol == "PLAINTEXT"
    assert admin_client(KafkaSettings())._client._security_protocol == "PLAINTEXT"


# -- TLS for real: a handshake against a local TLS server -----------------------------------------


async def _handshake(context: ssl.SSLContext, pki: dict[str, Path], server_hostname: str) -> None:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki["cert"])
    server_context.load_cert_chain(pki["cert"], pki["key"])
    server_context.verify_mode = ssl.CERT_REQUIRED  # mTLS: the client must present its certificate

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=server_hostname)
        assert await reader.read() == b"ok"
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_mutual_tls_handshake_with_cafile_certfile_keyfile(pki: dict[str, Path]) -> None:
    files = {"ssl_cafile": str(pki["cert"]), "ssl_certfile": str(pki["cert"]), "ssl_keyfile": str(pki["key"])}
    context = client_security(KafkaSettings(security_protocol="SSL", **files))["ssl_context"]
    await _handshake(context, pki, "localhost")
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|match"):
        await _handshake(context, pki, "kafka.example.com")
    relaxed = KafkaSettings(security_protocol="SSL", ssl_check_hostname=False, **files)
    await _handshake(client_security(relaxed)["ssl_context"], pki, "kafka.example.com")


# -- bad input: clear errors naming the key ------------------------------------------------------


def test_missing_password_env_var_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSWORD_ENV)
    kafka = sasl("SASL_SSL", "SCRAM-SHA-256")
    for build in (client_security, broker_security, make_broker, admin_client, RunFollower):
        with pytest.raises(
            ConfigError, match=rf"kafka\.sasl_password_env: environment variable {PASSWORD_ENV} is not set"
        ):
            build(kafka)
    monkeypatch.setenv(PASSWORD_ENV, "")
    with pytest.raises(ConfigError, match="kafka.sasl_password_env"):
        client_security(kafka)


def test_missing_certificate_file_names_the_key(tmp_path: Path) -> None:
    kafka = KafkaSettings(security_protocol="SSL", ssl_cafile=str(tmp_path / "nope.pem"))
    with pytest.raises(ConfigError, match=r"kafka\.ssl_cafile: file not found: .*nope\.pem"):
        client_security(kafka)


def test_garbage_certificate_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"kafka\.ssl_cafile: not a usable certificate"):
        client_security(KafkaSettings(security_protocol="SSL", ssl_cafile=str(tmp_path / "ca.pem")))


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        (
            {"security_protocol": "SASL_SSL"},
            "kafka.security_protocol SASL_SSL needs kafka.sasl_mechanism, kafka.sasl_username, kafka.sasl_password_env",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u"},
            "needs kafka.sasl_password_env",
        ),
        ({"sasl_username": "u"}, "kafka.sasl_username is set but kafka.security_protocol PLAINTEXT uses no SASL"),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_username": "u",
                "sasl_password_env": "P",
                "ssl_cafile": "/ca.pem",
            },
            "kafka.ssl_cafile is set but",
        ),
        ({"security_protocol": "SSL", "ssl_keyfile": "/k.pem"}, "kafka.ssl_keyfile is set without kafka.ssl_certfile"),
        ({"security_protocol": "TLS"}, "kafka.security_protocol: Input should be 'PLAINTEXT', 'SSL'"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "kafka.sasl_mechanism: Input should be"),
    ],
)
def test_invalid_combinations_are_config_errors(kafka: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(kafka=kafka)
    assert message in str(err.value)


def test_sasl_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "SECURITY_PROTOCOL": "SASL_SSL",
        "SASL_MECHANISM": "SCRAM-SHA-512",
        "SASL_USERNAME": "agentstream",
        "SASL_PASSWORD_ENV": PASSWORD_ENV,
    }.items():
        monkeypatch.setenv(f"AGENTSTREAM__KAFKA__{key}", value)
    kafka = load_settings().kafka
    assert without_context(client_security(kafka)) == {
        "security_protocol": "SASL_SSL",
        "ssl_context": "SSLContext",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "agentstream",
        "sasl_plain_password": SECRET,
    }


def test_a_list_of_brokers_reaches_the_clients_one_host_each() -> None:
    # FastStream hands a string to aiokafka inside a list, where aiokafka no longer splits it.
    broker = make_broker(KafkaSettings(bootstrap_servers="k1:9092, k2:9093,k3:9094"))
    assert broker.config.broker_config.builder.keywords["bootstrap_servers"] == ["k1:9092", "k2:9093", "k3:9094"]
    assert broker._connection_kwargs["bootstrap_servers"] == ["k1:9092", "k2:9093", "k3:9094"]
