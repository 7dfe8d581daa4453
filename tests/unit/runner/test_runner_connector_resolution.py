import pytest

from agentstream.config import load_settings
from agentstream_runner.connectors import Connectors, ScriptedConnector, resolve_connector
from agentstream_runner.errors import ConnectorError

A = {"id": "a", "type": "scripted", "capabilities": ["streaming"]}
B = {"id": "b", "type": "scripted", "capabilities": ["tools", "streaming"]}
C = {"id": "c", "type": "scripted", "capabilities": ["tools"]}


def settings(connectors, default=None):
    return load_settings(connectors=connectors, default_connector=default)


def test_request_option_wins_over_the_assistant():
    assert resolve_connector(settings([A, B]), "a", "b").id == "a"
    assert resolve_connector(settings([A, B]), None, "b").id == "b"


def test_explicit_id_never_falls_back():
    with pytest.raises(ConnectorError, match="'zzz' is not configured"):
        resolve_connector(settings([A, B]), None, "zzz")


def test_default_connector_then_first_with_tools_in_order():
    assert resolve_connector(settings([A, B, C], default="c"), None, None).id == "c"
    assert resolve_connector(settings([A, C, B]), None, None).id == "c"


def test_nothing_usable_is_connector_not_specified():
    for connectors in ([], [A]):
        with pytest.raises(ConnectorError, match="^connector not specified$"):
            resolve_connector(settings(connectors), None, None)


def test_roles_are_refused_clearly_for_now():
    with pytest.raises(ConnectorError, match="roles are not supported yet"):
        resolve_connector(settings([B]), "use::fast", None)


def test_unavailable_types_fail_clearly_and_scripted_is_reused():
    connectors = Connectors(settings([B, {"id": "gpt", "type": "openai", "model": "gpt-4o"}]))
    with pytest.raises(ConnectorError, match="connector type openai not available yet"):
        connectors.resolve("gpt", None)
    first = connectors.resolve("b", None)
    assert isinstance(first, ScriptedConnector) and connectors.resolve("b", None) is first


def test_missing_script_file_is_a_connector_error(tmp_path):
    connectors = Connectors(settings([{**B, "script": str(tmp_path / "missing.yaml")}]))
    with pytest.raises(ConnectorError, match="could not be opened"):
        connectors.resolve("b", None)
