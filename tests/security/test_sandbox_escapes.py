"""Attacks on the workspace sandbox, each as it was first carried out: a sandboxed `shell` or
`python` call tries to leave its namespaces, reach the host's files, another conversation's
workspace, a unix socket or the executor's processes. Each must fail and leave the host as it was."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.config.tools import SandboxSettings
from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream_tools.executor import execute
from agentstream_tools.registry import ToolRegistry
from agentstream_tools.sandbox import workspace_tools
from agentstream_tools.sandbox.isolation import probe
from agentstream_tools.sandbox.workspace import Workspaces

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not probe(SandboxSettings()).namespaces, reason="the kernel does not allow user namespaces here"
    ),
]
POSTGRES_SOCKET_DIR = Path("/var/run/postgresql")


def settings(root: Path, **kw: object) -> SandboxSettings:
    return SandboxSettings(**({"enabled": True, "root_dir": root, "wall_timeout_s": 10} | kw))


async def call(tools: ToolRegistry, tool: str, conversation: str = "web:mallory", **args: str) -> ToolCallResult:
    request = ToolCallRequest(
        run_id="r1",
        root_run_id="r1",
        conversation_key=conversation,
        call_id="c1",
        tool=tool,
        arguments=json.dumps(args),
    )
    result = await execute(tools, request, default_timeout_s=30)
    assert result.ok, result.error
    return result


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A folder the sandbox user could reach on the host (mode 0755 down from /tmp), removed after."""
    path = Path("/tmp") / f"agentstream-test-{secrets.token_hex(6)}"
    path.mkdir(mode=0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tools(host_dir: Path) -> ToolRegistry:
    return ToolRegistry(workspace_tools(settings(host_dir / "workspaces")))


async def test_umount_of_tmp_does_not_reach_the_host_tmp(tools: ToolRegistry) -> None:
    planted = Path("/tmp") / f"agentstream-escape-{secrets.token_hex(6)}"
    try:
        result = await call(
            tools,
            "shell",
            command=f"cd / ; umount -l /tmp; echo umount=$?; echo planted > {planted}; echo write=$?; "
            "unshare -U -r -m umount -l /tmp; echo nested=$?",
        )
        assert not planted.exists()  # the host's /tmp is untouched
        assert "umount=0" not in result.content and "nested=0" not in result.content, result.content
    finally:
        planted.unlink(missing_ok=True)


@pytest.mark.parametrize("mount", ["/tmp/workspace", "/proc"])
async def test_no_mount_of_the_sandbox_can_be_removed(tools: ToolRegistry, mount: str) -> None:
    result = await call(tools, "shell", command=f"cd / ; umount -l {mount}; echo umount=$?")
    assert "umount=0" not in result.content and "umount=" in result.content, result.content


async def test_proc_shows_only_the_commands_own_processes(tools: ToolRegistry) -> None:
    listed = await call(tools, "shell", command="cd / ; umount -l /proc 2>/dev/null; ls /proc; cat /proc/*/cmdline")
    pids = {int(word) for word in listed.content.split() if word.isdigit()}
    assert pids and len(pids) < 10 and os.getpid() not in pids, listed.content  # the sandbox's own few
    assert "pytest" not in listed.content  # no host process's command line


async def test_another_conversations_workspace_is_out_of_reach(host_dir: Path) -> None:
    conf = settings(host_dir / "workspaces")
    tools = ToolRegistry(workspace_tools(conf))
    await call(tools, "write_file", conversation="web:alice", path="secret.txt", content="alice's secret")
    alice = Workspaces(conf).path("web:alice")
    # Not computable from the key: another executor's secret gives another name.
    elsewhere = Workspaces(settings(host_dir / "other-workspaces")).path("web:alice")
    assert alice.name != elsewhere.name and "alice" not in alice.name
    # Not visible even to a command that knows the name (and tries to unmount its way there).
    attempt = await call(
        tools,
        "shell",
        conversation="web:mallory",
        command=f"cd / ; umount -l /tmp 2>/dev/null; cat {alice}/secret.txt; ls -a {alice.parent} | sed 's/^/listed /'; "
        f"echo planted > {alice}/planted.txt",
    )
    assert "alice's secret" not in attempt.content and f"listed {alice.name}" not in attempt.content, attempt.content
    assert sorted(p.name for p in alice.iterdir()) == ["secret.txt"]


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A socket folder under /run, where the sandbox user could otherwise connect; removed after."""
    path = Path("/run") / f"agentstream-test-{secrets.token_hex(6)}"
    try:
        path.mkdir(mode=0o755)
    except PermissionError:
        pytest.skip("/run is not writable by the test user")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


CONNECT = textwrap.dedent(
    """
    import socket, sys
    for path in sys.argv[1:]:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            print("connected", path, s.recv(16))
        except OSError as err:
            print("refused", path, err.errno)
    """
)


async def test_unix_sockets_of_the_host_cannot_be_reached(tools: ToolRegistry, run_dir: Path) -> None:
    accepted = 0

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        with contextlib.suppress(ConnectionError):  # the test's own probe hangs up at once
            writer.write(b"hello")
            await writer.drain()
        writer.close()

    path = run_dir / "agent.sock"
    server = await asyncio.start_unix_server(greet, path=str(path))
    os.chmod(path, 0o777)  # anyone who sees it may connect: only the sandbox's view may stop it
    targets = [str(path), str(Path("/var/run") / run_dir.name / "agent.sock")]
    if (POSTGRES_SOCKET_DIR / ".s.PGSQL.5432").exists():
        targets.append(str(POSTGRES_SOCKET_DIR / ".s.PGSQL.5432"))  # the real PostgreSQL's socket
    try:
        async with server:
            with socket.socket(socket.AF_UNIX) as own:  # the server answers outside the sandbox
                own.connect(str(path))
            result = await call(tools, "python", code=CONNECT.replace("sys.argv[1:]", repr(targets)))
    finally:
        server.close()
    assert accepted == 1, result.content  # only the test's own connection
    assert "connected" not in result.content and result.content.count("refused") == len(targets), result.content


async def test_no_process_environment_of_the_host_is_readable(host_dir: Path) -> None:
    """Commands of a non-root executor run under its own uid; here a process of the sandbox's uid
    with a secret in its environment stands for that executor (and the real one is probed too)."""
    root = os.geteuid() == 0
    conf = settings(host_dir / "workspaces", allow_weak_isolation=not root)  # not root: weak by uid
    tools = ToolRegistry(workspace_tools(conf))
    secret = secrets.token_hex(16)
    uid = conf.run_as_uid if root else None
    same_uid = await asyncio.create_subprocess_exec(
        "sleep", "60", env={"AGENTSTREAM_TEST_SECRET": secret, "PATH": "/usr/bin:/bin"}, user=uid, group=uid
    )
    try:
        pids = (same_uid.pid, os.getpid())
        reads = "; ".join(f"cat /proc/{pid}/environ; cat /proc/{pid}/cmdline" for pid in pids)
        result = await call(tools, "shell", command=f"cd / ; umount -l /proc 2>/dev/null; {reads}")
    finally:
        same_uid.kill()
        await same_uid.wait()
    assert secret not in result.content and "sleep" not in result.content, result.content
    assert all(f"/proc/{pid}/environ: No such file" in result.content for pid in pids), result.content
