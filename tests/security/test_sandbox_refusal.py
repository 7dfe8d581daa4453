"""The sandbox refuses to start where the host cannot isolate its commands, unless the operator
accepts weaker isolation in config, and then warns at every start."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agentstream.config.tools import SandboxSettings
from agentstream_tools.sandbox import workspace_tools
from agentstream_tools.sandbox.isolation import Isolation, SandboxUnavailable

STRONG = Isolation(limits=True, namespaces=True, own_uid=True)
WEAK = [
    (Isolation(limits=True, namespaces=False, own_uid=True, detail="unshare: Operation not permitted"), "namespaces"),
    (Isolation(limits=True, namespaces=True, own_uid=False), "its own user"),
    (Isolation(limits=False, namespaces=True, own_uid=True), "prlimit"),
]


def settings(root: Path, **kw: object) -> SandboxSettings:
    return SandboxSettings(**({"enabled": True, "root_dir": root} | kw))


@pytest.mark.parametrize(("isolation", "says"), WEAK)
def test_weak_isolation_refuses_to_start_with_the_reason(tmp_path: Path, isolation: Isolation, says: str) -> None:
    with pytest.raises(SandboxUnavailable) as refused:
        workspace_tools(settings(tmp_path), isolation)
    message = str(refused.value)
    assert says in message and "tools.sandbox.allow_weak_isolation: true" in message
    if isolation.detail:
        assert isolation.detail in message  # the probe's own words
    assert not (tmp_path / ".name-key").exists()  # refused before anything was made


@pytest.mark.parametrize(("isolation", "says"), WEAK)
def test_accepted_weak_isolation_serves_the_tools_and_warns(tmp_path: Path, isolation: Isolation, says: str) -> None:
    with capture_logs() as logs:
        tools = workspace_tools(settings(tmp_path, allow_weak_isolation=True), isolation)
    assert {t.name for t in tools} == {"shell", "python", "read_file", "write_file"}
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert "WEAK ISOLATION" in warning["event"] and any(says in w for w in warning["weaknesses"])


def test_strong_isolation_starts_without_a_warning(tmp_path: Path) -> None:
    with capture_logs() as logs:
        tools = workspace_tools(settings(tmp_path), STRONG)
    assert len(tools) == 4 and not [e for e in logs if e["log_level"] == "warning"]


def test_the_workspaces_folder_cannot_be_made_visible(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="would show the workspaces"):  # settings only: nothing is made
        settings(Path("/opt/agentstream/workspaces"), visible_paths=["/usr", "/opt/agentstream"])
    with pytest.raises(ValueError, match="not absolute"):
        settings(tmp_path / "ws", visible_paths=["usr"])


@pytest.mark.parametrize("path", ["/proc", "/proc/1", "/dev", "/tmp/x", "/var", "/run/postgresql", "/var/run"])
def test_private_paths_cannot_be_made_visible(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="overlap paths the sandbox keeps private"):
        settings(tmp_path / "ws", visible_paths=[path])


def test_an_interpreter_the_sandbox_cannot_see_is_refused_at_start(tmp_path: Path) -> None:
    interpreter = tmp_path / "bin" / "python3"  # outside the default visible_paths
    interpreter.parent.mkdir()
    interpreter.write_text("#!/bin/sh\n")
    interpreter.chmod(0o755)
    with pytest.raises(SandboxUnavailable, match=f"is {interpreter}, outside tools.sandbox.visible_paths"):
        workspace_tools(settings(tmp_path / "ws", python=str(interpreter)), STRONG)
