"""Connector resolution: which configured connector a run uses, and opening it.

Order (ARCHITECTURE §3 step 4): the request's `connector` option, else the
assistant's; an explicit id never falls back. Without one: the configured
`default_connector`, then the first connector (in configuration order) whose
capabilities include tools, else the error "connector not specified".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentstream.config import ConnectorSettings, Settings
from agentstream_runner.connectors.base import Connector
from agentstream_runner.connectors.scripted import ScriptedConnector
from agentstream_runner.errors import ConnectorError

ConnectorFactory = Callable[[ConnectorSettings], Connector]

# openai and anthropic arrive with a later issue; their configs already validate.
DEFAULT_FACTORIES: Mapping[str, ConnectorFactory] = {"scripted": ScriptedConnector}

ROLE_PREFIX = "use::"


def _configured(settings: Settings, connector_id: str, what: str) -> ConnectorSettings:
    if connector_id.startswith(ROLE_PREFIX):
        raise ConnectorError(f"{what} {connector_id!r}: connector roles are not supported yet")
    found = settings.connector(connector_id)
    if found is None:
        raise ConnectorError(f"{what} {connector_id!r} is not configured")
    return found


def resolve_connector(settings: Settings, requested: str | None, assistant_connector: str | None) -> ConnectorSettings:
    explicit = requested or assistant_connector
    if explicit:
        return _configured(settings, explicit, "connector")
    if settings.default_connector:
        return _configured(settings, settings.default_connector, "default_connector")
    with_tools = next((c for c in settings.connectors if "tools" in c.capabilities), None)
    if with_tools is not None:
        return with_tools
    raise ConnectorError("connector not specified")


class Connectors:
    """The configured connectors, opened on first use and then reused."""

    def __init__(self, settings: Settings, factories: Mapping[str, ConnectorFactory] = DEFAULT_FACTORIES) -> None:
        self._settings = settings
        self._factories = factories
        self._open: dict[str, Connector] = {}

    def resolve(self, requested: str | None, assistant_connector: str | None) -> Connector:
        config = resolve_connector(self._settings, requested, assistant_connector)
        if config.id not in self._open:
            factory = self._factories.get(config.type)
            if factory is None:
                raise ConnectorError(f"connector type {config.type} not available yet (connector {config.id!r})")
            try:
                self._open[config.id] = factory(config)
            except (OSError, ValueError) as err:  # e.g. a missing or invalid script file
                raise ConnectorError(f"connector {config.id!r} could not be opened: {err}") from err
        return self._open[config.id]
