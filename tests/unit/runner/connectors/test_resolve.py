"""Connector resolution: request, assistant, roles (user, team, system), defaults."""

from __future__ import annotations

import pytest

from agentstream.config import load_settings
from agentstream.config.runner import ConnectorType
from agentstream_runner.connectors.anthropic_connector import AnthropicConnector
from agentstream_runner.connectors.openai_connector import OpenAIConnector
from agentstream_runner.connectors.resolve import (
    DEFAULT_FACTORIES,
    ConnectorError,
    Connectors,
    RoleOverrides,
    resolve_connector,
)
from agentstream_runner.connectors.scripted import ScriptedConnector

A = {"id": "a", "type": "scripted", "capabilities": ["streaming"]}
B = {"id": "b", "type": "scripted", "capabilities": ["tools", "streaming"]}
C = {"id": "c", "type": "scripted", "capabilities": ["tools"]}
ALL = [{**A, "id": name} for name in ("u-fast", "t-fast", "s-fast", "u-def", "t-def", "s-def", "dflt")] + [C]


def settings(connectors, default=None, roles=None):
    return load_settings(connectors=connectors, default_connector=default, roles=roles or {})


def test_request_option_wins_over_the_assistant():
    assert resolve_connector(settings([A, B]), "a", "b").id == "a"
    assert resolve_connector(settings([A, B]), None, "b").id == "b"


def test_explicit_id_never_falls_back():
    full = settings([A, B], default="b", roles={"default": "b"})
    with pytest.raises(ConnectorError, match="'zzz' is not configured"):
        resolve_connector(full, None, "zzz", RoleOverrides(user={"default": "b"}))


def test_each_level_of_the_role_chain_in_turn():
    """Remove the winning level each time: the next one down is chosen."""
    levels = [
        ("user", "fast", "u-fast"),
        ("team", "fast", "t-fast"),
        ("system", "fast", "s-fast"),
        ("user", "default", "u-def"),
        ("team", "default", "t-def"),
        ("system", "default", "s-def"),
    ]
    chosen = []
    for removed in range(len(levels) + 2):
        remaining = levels[removed:]
        user = {role: cid for level, role, cid in remaining if level == "user"}
        team = {role: cid for level, role, cid in remaining if level == "team"}
        system = {role: cid for level, role, cid in remaining if level == "system"}
        default = "dflt" if removed <= len(levels) else None
        config = settings(ALL, default=default, roles=system)
        chosen.append(resolve_connector(config, None, "use::fast", RoleOverrides(user=user, team=team)).id)
    assert chosen == ["u-fast", "t-fast", "s-fast", "u-def", "t-def", "s-def", "dflt", "c"]
    with pytest.raises(ConnectorError, match="^connector not specified$"):
        resolve_connector(settings([A]), None, "use::fast")


def test_request_role_and_no_connector_use_the_default_role():
    config = settings([A, B], roles={"default": "a", "fast": "b"})
    assert resolve_connector(config, "use::fast", "a").id == "b"
    assert resolve_connector(config, None, None).id == "a"


def test_role_pointing_at_an_unconfigured_connector_is_skipped():
    config = settings([A, B], roles={"fast": "gone"})
    assert resolve_connector(config, None, "use::fast", RoleOverrides(user={"fast": "nope"})).id == "b"


def test_default_connector_then_first_with_tools_in_order():
    assert resolve_connector(settings([A, B, C], default="c"), None, None).id == "c"
    assert resolve_connector(settings([A, C, B]), None, None).id == "c"


def test_nothing_usable_is_connector_not_specified():
    for connectors in ([], [A]):
        with pytest.raises(ConnectorError, match="^connector not specified$"):
            resolve_connector(settings(connectors), None, None)


def test_connector_types_open_and_are_reused():
    connectors = Connectors(
        settings([B, {"id": "gpt", "type": "openai", "model": "gpt-4o"}, {"id": "claude", "type": "anthropic"}])
    )
    assert isinstance(connectors.resolve("gpt", None), OpenAIConnector)
    assert isinstance(connectors.resolve("claude", None), AnthropicConnector)
    first = connectors.resolve("b", None)
    assert isinstance(first, ScriptedConnector) and connectors.resolve("b", None) is first


def test_unavailable_connector_type_fails_clearly():
    connectors = Connectors(settings([B, {"id": "gpt", "type": "openai"}]), factories={})
    with pytest.raises(ConnectorError, match="connector type openai not available"):
        connectors.resolve("gpt", None)


def test_missing_script_file_is_a_connector_error(tmp_path):
    connectors = Connectors(settings([{**B, "script": str(tmp_path / "missing.yaml")}]))
    with pytest.raises(ConnectorError, match="could not be opened"):
        connectors.resolve("b", None)


@pytest.mark.timeout(60)  # a fresh interpreter importing the SDKs
def test_the_sdk_of_a_configured_connector_is_imported_at_start_and_only_that_one():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from agentstream.config import load_settings\n"
        "from agentstream_runner.connectors.resolve import Connectors\n"
        "c = Connectors(load_settings(connectors=[{'id': 'g', 'type': 'openai', 'base_url': 'http://x/v1'}]))\n"
        "assert 'openai' not in sys.modules\n"
        "c.preload()\n"
        "assert 'openai' in sys.modules and 'anthropic' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


class Opened:
    """A connector holding a connection: records that it was closed."""

    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


async def test_close_closes_every_opened_connection_and_a_later_run_opens_a_new_one():
    opened: list[Opened] = []

    def factory(_config):
        opened.append(Opened())
        return opened[-1]

    connectors = Connectors(settings([{**A, "type": "openai"}, {**B, "type": "openai"}]), factories={"openai": factory})
    connectors.resolve("a", None)
    connectors.resolve("b", None)
    await connectors.close()
    assert [o.closed for o in opened] == [True, True]
    assert connectors.resolve("a", None) is opened[2] and not opened[2].closed


async def test_close_closes_the_sdk_http_clients_of_openai_and_anthropic():
    connectors = Connectors(settings([{"id": "gpt", "type": "openai"}, {"id": "claude", "type": "anthropic"}]))
    clients = [connectors.resolve(name, None)._client for name in ("gpt", "claude")]
    assert not any(client.is_closed() for client in clients)
    await connectors.close()
    assert all(client.is_closed() for client in clients)


def test_the_open_connectors_resolve_the_assistants_connector_and_the_users_roles():
    connectors = Connectors(settings([A, B], roles={"fast": "a"}))
    assert connectors.resolve(None, "a") is connectors.resolve("a", None)
    by_user = connectors.resolve(None, "use::fast", RoleOverrides(user={"fast": "b"}))
    assert by_user is connectors.resolve("b", None)


async def test_close_skips_connectors_without_connections():
    opened: list[Opened] = []

    def factory(_config):
        opened.append(Opened())
        return opened[-1]

    connectors = Connectors(
        settings([A, {**B, "type": "openai"}]), factories={"openai": factory, "scripted": ScriptedConnector}
    )
    scripted = connectors.resolve("a", None)
    assert not hasattr(scripted, "aclose")
    connectors.resolve("b", None)
    await connectors.close()
    assert opened[0].closed and connectors.resolve("a", None) is not scripted


def test_preload_imports_the_module_of_each_configured_sdk_connector_type(monkeypatch):
    from agentstream_runner.connectors import resolve

    imported: list[str] = []
    monkeypatch.setattr(resolve.importlib, "import_module", imported.append)
    Connectors(settings([A, {"id": "claude", "type": "anthropic"}, {"id": "gpt", "type": "openai"}])).preload()
    assert imported == [resolve.PRELOAD["anthropic"], resolve.PRELOAD["openai"]]


def test_every_connector_kind_the_config_accepts_has_a_factory():
    assert set(DEFAULT_FACTORIES) == set(ConnectorType)
