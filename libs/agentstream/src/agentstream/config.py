"""Configuration: one YAML file plus ``AGENTSTREAM__SECTION__KEY`` environment overrides.

Precedence (highest first): explicit overrides passed in code, environment variables,
the YAML file (``--config`` or ``AGENTSTREAM_CONFIG``), defaults. Secrets never live in
the file: it names environment variables (``api_key_env``, ``token_env``) instead.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

CONFIG_ENV_VAR = "AGENTSTREAM_CONFIG"
SERVICES = ("ingress", "agent-runner", "tool-executor", "delivery", "persistence")


_yaml_path: ContextVar[str | None] = ContextVar("agentstream_config_path", default=None)


class ConfigError(ValueError):
    """An invalid configuration value; the message names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KafkaSettings(_Section):
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


class DatabaseSettings(_Section):
    url: str = Field(
        default="sqlite+aiosqlite:///./.agentstream/agentstream.db",
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+psycopg://user@host/db.",
    )
    echo: bool = False


class ConnectorSettings(_Section):
    id: str
    type: Literal["openai", "anthropic", "scripted"]
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = Field(default=None, description="Name of the env var holding the API key.")
    capabilities: list[Literal["tools", "vision", "reasoning", "streaming"]] = Field(
        default_factory=lambda: ["tools", "streaming"]
    )
    script: str | None = Field(default=None, description="scripted: path of a YAML script (default: built-in demo).")
    token_delay_ms: float = Field(default=20.0, ge=0, description="scripted: pause between streamed tokens.")

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class HttpSettings(_Section):
    host: str = Field(default="127.0.0.1", description="Bind address of every service's HTTP server.")
    ingress: int = 8181
    agent_runner: int = 8182
    tool_executor: int = 8183
    delivery: int = 8184
    persistence: int = 8185

    def port_for(self, service: str) -> int:
        return int(getattr(self, service.replace("-", "_")))


class PlatformSettings(_Section):
    enabled: bool = True
    api_url: str | None = None
    token_env: str | None = None
    edit_interval: float | None = Field(default=None, gt=0, description="Seconds between edits of one message.")
    max_length: int | None = Field(default=None, ge=1)


class RunnerSettings(_Section):
    coalesce_ms: float = Field(default=50.0, ge=0, description="Window in which text deltas are merged.")
    tool_timeout_s: float = Field(default=30.0, gt=0)
    heartbeat_s: float = Field(default=5.0, gt=0)


class Settings(BaseSettings):
    """The whole configuration. See docs/configuration.md for every key."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTSTREAM__",
        env_nested_delimiter="__",
        extra="forbid",
        nested_model_default_partial_update=True,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    connectors: list[ConnectorSettings] = Field(
        default_factory=lambda: [ConnectorSettings(id="demo", type="scripted")]
    )
    default_connector: str | None = None
    roles: dict[str, str] = Field(default_factory=dict, description="role → connector id")
    assistants_dir: str | None = None
    default_assistant: str = "default"
    tools: dict[str, Any] = Field(default_factory=dict)
    platforms: dict[str, PlatformSettings] = Field(default_factory=dict)
    profiles: dict[str, Any] = Field(default_factory=dict)
    routes: list[dict[str, Any]] = Field(default_factory=list)
    authz: dict[str, Any] = Field(default_factory=dict)
    hooks: dict[str, Any] = Field(default_factory=dict)
    relay: list[dict[str, Any]] = Field(default_factory=list)
    resume: dict[str, Any] = Field(default_factory=dict)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    log_level: str = "INFO"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _yaml_path.get() or os.environ.get(CONFIG_ENV_VAR)
        if path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)

    def connector(self, connector_id: str) -> ConnectorSettings | None:
        return next((c for c in self.connectors if c.id == connector_id), None)

    def topic(self, name: str) -> str:
        return f"{self.kafka.topic_prefix}{name}"


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(root)"
        got = e.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        lines.append(f"{key}: {e['msg']}{shown}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Load settings from the YAML file (argument or ``AGENTSTREAM_CONFIG``) and env.

    Raises `ConfigError` naming every invalid key.
    """
    path = str(config_file) if config_file is not None else os.environ.get(CONFIG_ENV_VAR)
    if path and not Path(path).is_file():
        raise ConfigError(f"config file not found: {path}")
    token = _yaml_path.set(path)
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise ConfigError(_describe(err)) from None
    finally:
        _yaml_path.reset(token)
