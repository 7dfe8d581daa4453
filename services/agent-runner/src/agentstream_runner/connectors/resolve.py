"""Which connector answers a run, and the open connectors.

`resolve_connector` is the pure decision:
1. the request's `connector` option, else the assistant's connector;
   - an explicit id is used as is and never falls back (unknown id → error);
   - `use::<role>` resolves the role for the user, then the team, then the system
     (`roles` config), then the `default` role the same way;
2. nothing named (or the role resolved nowhere): the `default` role chain, then
   `default_connector`, then the first connector with the `tools` capability
   (config order, so deterministic);
3. else the error "connector not specified".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial

from agentstream.config import ConnectorSettings, Settings
from agentstream.config.runner import ConnectorType
from agentstream_runner.connectors.base import Connector, RemoteConnector
from agentstream_runner.connectors.scripted import ScriptedConnector
from agentstream_runner.outcome import RunFailure


class ConnectorError(RunFailure):
    """No usable connector for the run."""


ConnectorFactory = Callable[[ConnectorSettings], Connector]


def _openai(settings: ConnectorSettings) -> Connector:
    from agentstream_runner.connectors.openai_connector import OpenAIConnector

    return OpenAIConnector(settings)


def _anthropic(settings: ConnectorSettings) -> Connector:
    # Imported when configured: the anthropic SDK alone takes seconds to import.
    from agentstream_runner.connectors.anthropic_connector import AnthropicConnector

    return AnthropicConnector(settings)


DEFAULT_FACTORIES: Mapping[str, ConnectorFactory] = {
    ConnectorType.SCRIPTED: ScriptedConnector,
    ConnectorType.OPENAI: _openai,
    ConnectorType.ANTHROPIC: _anthropic,
}
# The modules `_openai` and `_anthropic` import, loaded at start when such a connector is configured.
PRELOAD = {
    ConnectorType.OPENAI: "agentstream_runner.connectors.openai_connector",
    ConnectorType.ANTHROPIC: "agentstream_runner.connectors.anthropic_connector",
}

ROLE_PREFIX = "use::"
DEFAULT_ROLE = "default"
NOT_SPECIFIED = "connector not specified"


@dataclass(frozen=True)
class RoleOverrides:
    """role → connector id for this run's user and team (`role_settings` rows)."""

    user: Mapping[str, str] = field(default_factory=dict)
    team: Mapping[str, str] = field(default_factory=dict)


def _role_candidates(settings: Settings, role: str, overrides: RoleOverrides) -> Iterator[str]:
    for name in dict.fromkeys((role, DEFAULT_ROLE)):  # the role, then `default` (once)
        for level in (overrides.user, overrides.team, settings.roles):
            if (connector_id := level.get(name)) is not None:
                yield connector_id


def _by_role(settings: Settings, role: str, overrides: RoleOverrides) -> ConnectorSettings | None:
    # A role pointing at a connector that is not configured is skipped like an unset one.
    found = (settings.connector(c) for c in _role_candidates(settings, role, overrides))
    return next((c for c in found if c is not None), None)


def resolve_connector(
    settings: Settings,
    requested: str | None,
    assistant_connector: str | None,
    overrides: RoleOverrides | None = None,
) -> ConnectorSettings:
    overrides = overrides or RoleOverrides()
    named = requested or assistant_connector
    if named and not named.startswith(ROLE_PREFIX):
        found = settings.connector(named)
        if found is None:
            raise ConnectorError(f"connector {named!r} is not configured")
        return found
    role = named[len(ROLE_PREFIX) :] if named else DEFAULT_ROLE
    if (by_role := _by_role(settings, role, overrides)) is not None:
        return by_role
    if settings.default_connector and (default := settings.connector(settings.default_connector)):
        return default
    with_tools = next((c for c in settings.connectors if "tools" in c.capabilities), None)
    if with_tools is not None:
        return with_tools
    raise ConnectorError(NOT_SPECIFIED)


class Connectors:
    """The configured connectors, opened on first use and then reused."""

    def __init__(
        self,
        settings: Settings,
        factories: Mapping[str, ConnectorFactory] = DEFAULT_FACTORIES,
        *,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        """`on_retry(connector id)`: told of each further attempt of a model call."""
        self._settings = settings
        self._factories = factories
        self._on_retry = on_retry
        self._open: dict[str, Connector] = {}

    def preload(self) -> None:
        """Import the SDK of every configured connector type now, at start, so that the first
        run does not wait for it (the openai SDK takes ~1 s to import, anthropic's longer)."""
        for config in self._settings.connectors:
            module = PRELOAD.get(config.type)
            if module is not None:
                importlib.import_module(module)

    def resolve(
        self, requested: str | None, assistant_connector: str | None, overrides: RoleOverrides | None = None
    ) -> Connector:
        return self.open(resolve_connector(self._settings, requested, assistant_connector, overrides))

    def open(self, config: ConnectorSettings) -> Connector:
        if config.id not in self._open:
            factory = self._factories.get(config.type)
            if factory is None:
                raise ConnectorError(f"connector type {config.type} not available (connector {config.id!r})")
            try:
                connector = factory(config)
            except (OSError, ValueError) as err:  # e.g. a missing or invalid script file
                raise ConnectorError(f"connector {config.id!r} could not be opened: {err}") from err
            if isinstance(connector, RemoteConnector) and self._on_retry is not None:
                connector.on_retry = partial(self._on_retry, config.id)
            self._open[config.id] = connector
        return self._open[config.id]

    async def close(self) -> None:
        """Close the connectors that hold connections (HTTP clients)."""
        opened, self._open = list(self._open.values()), {}
        for connector in opened:
            if (aclose := getattr(connector, "aclose", None)) is not None:
                await aclose()
