"""Configuration: one YAML file plus ``AGENTSTREAM__SECTION__KEY`` environment overrides.

Precedence (highest first): explicit overrides passed in code, environment variables,
the YAML file (``--config`` or ``AGENTSTREAM_CONFIG``), defaults. Secrets never live in
the file: it names environment variables (``api_key_env``, ``token_env``) instead.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from agentstream.config.auth import AuthSettings
from agentstream.config.core import DatabaseSettings, HttpSettings, KafkaSettings, ShutdownSettings
from agentstream.config.delivery import HooksSettings, PlatformSettings, RelayRule
from agentstream.config.ingress import AuthzSettings, IngressSettings, ProfileSettings, RouteSettings
from agentstream.config.persistence import ResumeSettings
from agentstream.config.retention import RetentionSettings
from agentstream.config.runner import ConnectorSettings, ConnectorType, RunnerSettings
from agentstream.config.tools import ToolsSettings
from agentstream.config.tracing import TracingSettings

CONFIG_ENV_VAR = "AGENTSTREAM_CONFIG"
SERVICES = ("ingress", "agent-runner", "tool-executor", "delivery", "persistence")


_yaml_path: ContextVar[str | None] = ContextVar("agentstream_config_path", default=None)


class ConfigError(ValueError):
    """An invalid configuration value; the message names the key."""


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
    shutdown: ShutdownSettings = Field(default_factory=ShutdownSettings)
    connectors: list[ConnectorSettings] = Field(
        default_factory=lambda: [ConnectorSettings(id="demo", type=ConnectorType.SCRIPTED)]
    )
    default_connector: str | None = None
    roles: dict[str, str] = Field(default_factory=dict, description="role → connector id")
    assistants_dir: str | None = None
    default_assistant: str = "default"
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    platforms: dict[str, PlatformSettings] = Field(default_factory=dict)
    profiles: dict[str, ProfileSettings] = Field(default_factory=dict)
    routes: list[RouteSettings] = Field(default_factory=list)
    authz: AuthzSettings = Field(default_factory=AuthzSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    ingress: IngressSettings = Field(default_factory=IngressSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    relay: list[RelayRule] = Field(default_factory=list)
    resume: ResumeSettings = Field(default_factory=ResumeSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
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


def _check_yaml(path: str) -> None:
    """The file parses, to a mapping of sections: else a `ConfigError` naming the line (not a parser traceback)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"invalid configuration:\n  (root): {path} is not valid YAML: {problem}{where}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"invalid configuration:\n  (root): {path} must be a mapping of sections (kafka:, database:, …), "
            f"not a {type(data).__name__}"
        )


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Load settings from the YAML file (argument or ``AGENTSTREAM_CONFIG``) and env.

    Raises `ConfigError` naming every invalid key.
    """
    path = str(config_file) if config_file is not None else os.environ.get(CONFIG_ENV_VAR)
    if path and not Path(path).is_file():
        raise ConfigError(f"config file not found: {path}")
    if path:
        _check_yaml(path)
    token = _yaml_path.set(path)
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise ConfigError(_describe(err)) from None
    finally:
        _yaml_path.reset(token)
