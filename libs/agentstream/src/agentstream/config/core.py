"""Sections every service uses: kafka, database, http."""

from __future__ import annotations

import warnings
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator


class Section(BaseModel):
    """Base of every config section: unknown keys are errors (a typo names its key)."""

    model_config = ConfigDict(extra="forbid")


class SecurityProtocol(StrEnum):
    """Kafka's `security.protocol`: TLS and/or SASL authentication to the brokers."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class KafkaFlavor(StrEnum):
    """Which broker implementation is behind `bootstrap_servers`; the producer and consumer
    settings that differ between them are chosen in `agentstream.kafka.flavor`."""

    AUTO = "auto"  # tansu when in_memory, else read off the broker's ApiVersions at start
    TANSU = "tansu"
    KAFKA = "kafka"


EMBEDDED_DEPRECATED = (
    "kafka.embedded is deprecated: for a Tansu broker set kafka.flavor: tansu (or leave auto, which detects it), "
    "and kafka.in_memory: true if it keeps its topics in memory"
)
OPTIONAL_BOOL: TypeAdapter[bool | None] = TypeAdapter(bool | None)


class KafkaSettings(Section):
    bootstrap_servers: str = Field(default="127.0.0.1:9092", description="Comma-separated host:port list.")
    topic_prefix: str = Field(default="agentstream.", description="Prefix of every topic name.")
    partitions: int = Field(default=4, ge=1, description="Partitions of every co-partitioned topic.")
    replication_factor: int = Field(default=1, ge=1)
    min_insync_replicas: int | None = Field(
        default=None,
        ge=1,
        description="min.insync.replicas of created topics: replicas that must hold a record before an acks=all "
        "write succeeds (2 with replication_factor 3); default: the broker's.",
    )
    in_memory: bool = Field(
        default=False,
        description="The broker keeps its topics in memory and forgets them when it restarts (a Tansu with "
        "memory storage, like the embedded one): services hold their output while it is away.",
    )
    flavor: KafkaFlavor = Field(
        default=KafkaFlavor.AUTO, description="tansu, kafka, or auto (tansu when in_memory, else detected)."
    )
    enable_idempotence: bool | None = Field(
        default=None, description="Idempotent producer; default from the flavor (on for Kafka, off for Tansu)."
    )
    fetch_max_wait_ms: int | None = Field(
        default=None, ge=1, description="Consumer fetch wait; default from the flavor (10 ms Tansu, 500 ms Kafka)."
    )
    client_id: str = "agentstream"
    auto_create_topics: bool = Field(
        default=True, description="Create missing topics when a service starts or finds them gone."
    )
    health_interval_s: float = Field(
        default=1.0, gt=0, le=60, description="How often each service checks that Kafka answers and has its topics."
    )
    lag_interval_s: float = Field(
        default=15.0,
        ge=0,
        le=3600,
        description="How often each service reads and exports its consumer group's lag; 0 turns it off.",
    )
    security_protocol: SecurityProtocol = Field(
        default=SecurityProtocol.PLAINTEXT, description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."
    )
    sasl_mechanism: SaslMechanism | None = Field(default=None, description="SASL_*: PLAIN, SCRAM-SHA-256/512.")
    sasl_username: str | None = Field(default=None, description="SASL_*: the user name.")
    sasl_password_env: str | None = Field(default=None, description="SASL_*: name of the env var holding the password.")
    ssl_cafile: str | None = Field(default=None, description="SSL/SASL_SSL: CA bundle (PEM); default: system CAs.")
    ssl_certfile: str | None = Field(default=None, description="SSL/SASL_SSL: client certificate (PEM), for mTLS.")
    ssl_keyfile: str | None = Field(default=None, description="SSL/SASL_SSL: the client certificate's key (PEM).")
    ssl_check_hostname: bool = Field(default=True, description="SSL/SASL_SSL: the broker certificate names its host.")

    @model_validator(mode="before")
    @classmethod
    def _embedded_is_an_alias(cls, data: Any) -> Any:
        """`embedded` is the deprecated spelling of `flavor: tansu` + `in_memory: true`; it never started a
        broker (`agentstream up` does, unless --no-broker). Translated here, so no setting holds it."""
        if not isinstance(data, dict) or "embedded" not in data:
            return data
        data = dict(data)
        given = data.pop("embedded")
        if given is None:  # its old default, written out
            return data
        try:
            embedded = OPTIONAL_BOOL.validate_python(given)
        except ValidationError:
            raise ValueError(f"kafka.embedded (deprecated) must be true or false, not {given!r}") from None
        # Named for the setting, not a line of pydantic's: the operator's file has no line to point at.
        warnings.warn_explicit(EMBEDDED_DEPRECATED, FutureWarning, "agentstream settings", 0)
        if embedded:
            data["in_memory"] = True
            if data.get("flavor", KafkaFlavor.AUTO) == KafkaFlavor.AUTO:
                data["flavor"] = KafkaFlavor.TANSU
        return data

    @model_validator(mode="after")
    def _security_is_consistent(self) -> KafkaSettings:
        if self.security_protocol.uses_sasl:
            missing = [
                f"kafka.{name}"
                for name in ("sasl_mechanism", "sasl_username", "sasl_password_env")
                if not getattr(self, name)
            ]
            if missing:
                raise ValueError(f"kafka.security_protocol {self.security_protocol.value} needs {', '.join(missing)}")
        # Set but unused would connect without what the operator asked for: refuse instead.
        elif unused := [k for k in ("sasl_mechanism", "sasl_username", "sasl_password_env") if getattr(self, k)]:
            raise ValueError(
                f"kafka.{unused[0]} is set but kafka.security_protocol {self.security_protocol.value} uses no SASL"
            )
        if not self.security_protocol.uses_tls and (
            unused := [k for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if getattr(self, k)]
        ):
            raise ValueError(
                f"kafka.{unused[0]} is set but kafka.security_protocol {self.security_protocol.value} uses no TLS"
            )
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("kafka.ssl_keyfile is set without kafka.ssl_certfile")
        # More than the replicas a topic has: the broker would refuse every acks=all write to it.
        if self.min_insync_replicas is not None and self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"kafka.min_insync_replicas {self.min_insync_replicas} exceeds kafka.replication_factor "
                f"{self.replication_factor}: no write could succeed"
            )
        return self


class DatabaseSettings(Section):
    url: str = Field(
        default="sqlite+aiosqlite:///./.agentstream/agentstream.db",
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+psycopg://user@host/db.",
    )
    echo: bool = False


class HttpSettings(Section):
    host: str = Field(default="127.0.0.1", description="Bind address of every service's HTTP server.")
    ingress: int = 8181
    agent_runner: int = 8182
    tool_executor: int = 8183
    delivery: int = 8184
    persistence: int = 8185

    def port_for(self, service: str) -> int:
        return int(getattr(self, service.replace("-", "_")))


class ShutdownSettings(Section):
    grace_s: float = Field(
        default=30.0,
        ge=0,
        description="On SIGTERM, how long a service stops taking new work and lets what it runs finish "
        "(runs, streams, tool calls, flushes) before it stops; what still runs then is cut. Below the "
        "pod's terminationGracePeriodSeconds by the stop's own 10 s and a margin.",
    )
