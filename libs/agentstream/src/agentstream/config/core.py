"""Sections every service uses: kafka, database, http."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    """Base of every config section: unknown keys are errors (a typo names its key)."""

    model_config = ConfigDict(extra="forbid")


class KafkaSettings(Section):
    bootstrap_servers: str = Field(default="127.0.0.1:9092", description="Comma-separated host:port list.")
    topic_prefix: str = Field(default="agentstream.", description="Prefix of every topic name.")
    partitions: int = Field(default=4, ge=1, description="Partitions of every co-partitioned topic.")
    replication_factor: int = Field(default=1, ge=1)
    embedded: bool = Field(default=False, description="True when talking to the embedded Tansu broker.")
    enable_idempotence: bool | None = Field(
        default=None, description="Idempotent producer; default on for real Kafka, off for Tansu."
    )
    fetch_max_wait_ms: int | None = Field(
        default=None, ge=1, description="Consumer fetch wait; default 10 ms embedded, 100 ms otherwise."
    )
    client_id: str = "agentstream"
    auto_create_topics: bool = Field(default=True, description="Create missing topics when a service starts.")

    @property
    def idempotence(self) -> bool:
        return (not self.embedded) if self.enable_idempotence is None else self.enable_idempotence

    @property
    def fetch_wait_ms(self) -> int:
        if self.fetch_max_wait_ms is not None:
            return self.fetch_max_wait_ms
        return 10 if self.embedded else 100


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


