"""Configuration: one YAML file plus ``AGENTSTREAM__SECTION__KEY`` environment overrides.

`settings.py` holds the root `Settings` and `load_settings`; each service area keeps its
section models in its own module (core, runner, delivery, ingress, persistence).
"""

from agentstream.config.core import (
    DatabaseSettings,
    HttpSettings,
    KafkaFlavor,
    KafkaSettings,
    SaslMechanism,
    Section,
    SecurityProtocol,
    ShutdownSettings,
)
from agentstream.config.delivery import PlatformSettings, PlatformTexts, TextFormat, ToolProgress
from agentstream.config.ingress import IngressTexts
from agentstream.config.runner import DEFAULT_CAPABILITIES, Capability, ConnectorSettings, RunnerSettings, RunnerTexts
from agentstream.config.settings import CONFIG_ENV_VAR, SERVICES, ConfigError, Settings, load_settings
from agentstream.config.tracing import TracingSettings

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_CAPABILITIES",
    "SERVICES",
    "Capability",
    "ConfigError",
    "ConnectorSettings",
    "DatabaseSettings",
    "HttpSettings",
    "ShutdownSettings",
    "IngressTexts",
    "KafkaFlavor",
    "KafkaSettings",
    "PlatformSettings",
    "PlatformTexts",
    "RunnerSettings",
    "RunnerTexts",
    "SaslMechanism",
    "Section",
    "SecurityProtocol",
    "Settings",
    "TextFormat",
    "ToolProgress",
    "TracingSettings",
    "load_settings",
]
