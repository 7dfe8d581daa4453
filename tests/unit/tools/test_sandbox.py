"""The workspace tools: per-conversation directories, rlimits, wall timeout, no network,
capped output; escapes and abuse fail cleanly and the executor stays up."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from agentstream.config.tools import SandboxSettings
from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream_tools.executor import execute
from agentstream_tools.registry import ToolRegistry
from agentstream_tools.sandbox import workspace_tools
from agentstream_tools.sandbox.isolation import probe

# Each test runs sandboxed processes under resource limits (fork bombs, huge outputs).
pytestmark = pytest.mark.timeout(60)


def settings(root: Path, **kw) -> SandboxSettings:
    base = {"enabled": True, "root_dir": root, "wall_timeout_s": 5, "cpu_s": 2, "memory_mb": 256}
    return SandboxSettings(**(base | kw))


async def call(registry: ToolRegistry, tool: str, conversation: str = "web:alice", **args) -> ToolCallResult:
    request = ToolCallRequest(
        run_id="r1",
        root_run_id="r1",
        conversation_key=conversation,
        call_id="c1",
        tool=tool,
        arguments=json.dumps(args),
    )
    return await execute(registry, request, default_timeout_s=30)


@pytest.fixture
def tools(tmp_path) -> ToolRegistry:
    return ToolRegistry(workspace_tools(settings(tmp_path / "ws")))


def sandbox_processes() -> int:
    uid = SandboxSettings().run_as_uid if os.geteuid() == 0 else None
    if uid is None:
        return 0
    return sum(1 for e in os.scandir("/proc") if e.name.isdigit() and _owned(e.path, uid))


def _owned(path: str, uid: int) -> bool:
    try:
        return os.stat(path).st_uid == uid
    except OSError:
        return False


def any_exists(*paths: str | Path) -> bool:
    return any(os.path.exists(p) for p in paths)


isolated = pytest.mark.skipif(
    not probe(SandboxSettings()).namespaces, reason="the kernel does not allow user namespaces here"
)


def test_off_by_default():
    assert workspace_tools(SandboxSettings()) == []


async def test_files_written_are_read_back_and_seen_by_commands(tools):
    wrote = await call(tools, "write_file", path="notes/today.txt", content="héllo\n")
    assert (wrote.ok, wrote.content) == (True, "wrote 7 bytes to notes/today.txt")
    assert (await call(tools, "read_file", path="notes/today.txt")).content == "héllo\n"
    shell = await call(tools, "shell", command="cat notes/today.txt && echo more > notes/more.txt")
    assert shell.ok and shell.content == "exit status 0\nhéllo\n"
    assert (await call(tools, "read_file", path="./notes/more.txt")).content == "more\n"
    py = await call(tools, "python", code="print(open('notes/today.txt').read().upper(), end='')")
    assert py.content == "exit status 0\nHÉLLO\n"
    failing = await call(tools, "shell", command="echo oops >&2; exit 3")
    assert failing.ok and failing.content == "exit status 3\noops\n"


async def test_each_conversation_has_its_own_workspace(tools):
    await call(tools, "write_file", conversation="web:alice", path="secret.txt", content="alice's")
    other = await call(tools, "read_file", conversation="web:bob", path="secret.txt")
    assert not other.ok and "no such file" in other.error
    listing = await call(tools, "shell", conversation="web:bob", command="ls -A")
    assert listing.content == "exit status 0"


@pytest.mark.parametrize("path", ["../secret.txt", "notes/../../x", "/etc/passwd", "a/../../../etc/passwd"])
async def test_dotdot_and_absolute_paths_are_refused(tools, path):
    for tool, extra in (("read_file", {}), ("write_file", {"content": "x"})):
        result = await call(tools, tool, path=path, **extra)
        assert not result.ok and result.retryable
        assert "'..' is not allowed" in result.error or "must be relative" in result.error


async def test_symlinks_out_of_the_workspace_are_not_followed(tools, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    await call(tools, "shell", command=f"ln -s {outside}/secret.txt file_link; ln -s {outside} dir_link; ln -s / root")
    for path in ("file_link", "dir_link/secret.txt", "root/etc/passwd"):
        result = await call(tools, "read_file", path=path)
        assert not result.ok and not result.retryable and "symbolic link" in result.error, path
    written = await call(tools, "write_file", path="dir_link/planted.txt", content="x")
    assert not written.ok and "symbolic link" in written.error
    overwrite = await call(tools, "write_file", path="file_link", content="x")
    assert not overwrite.ok and "symbolic link" in overwrite.error
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


async def test_hard_links_and_special_files_are_not_read(tools):
    await call(tools, "shell", command="echo x > a; ln a b; mkfifo pipe; mkdir d")
    for path, says in (("b", "single link"), ("pipe", "single link"), ("d", "not a regular file")):
        result = await call(tools, "read_file", path=path)
        assert not result.ok and says in result.error, path


@isolated
async def test_writes_outside_the_workspace_fail_or_stay_private(tools):
    probe_file = Path("/tmp") / f"agentstream-sandbox-probe-{os.getpid()}"
    result = await call(
        tools, "shell", command=f"echo x > /etc/agentstream-probe; echo y > {probe_file}; cat {probe_file}"
    )
    assert result.ok and "exit status 0" in result.content and "y" in result.content  # its own /tmp
    assert not any_exists("/etc/agentstream-probe", probe_file)  # the host's /tmp was not touched
    assert "Permission denied" in result.content or "Read-only" in result.content


@isolated
async def test_no_network(tools):
    code = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), 2)\n    print('connected')\nexcept OSError as e:\n    print('refused', e.errno)"
    result = await call(tools, "python", code=code)
    assert result.ok and "refused" in result.content and "connected" not in result.content.replace("refused", "")


async def test_huge_output_is_cut_with_a_marker(tmp_path):
    # Generous limits for the finite command: on a loaded machine 5 MB through a pipe can take seconds.
    patient = ToolRegistry(
        workspace_tools(settings(tmp_path / "ws", output_max_chars=1000, wall_timeout_s=30, cpu_s=10))
    )
    result = await call(patient, "shell", command="head -c 5000000 /dev/zero | tr '\\0' a")
    assert result.ok and result.content.startswith("exit status 0\n" + "a" * 100)
    assert "[output truncated: 5000000 bytes in all, the first 1000 characters shown]" in result.content
    assert len(result.content) < 1200
    # The CPU limit above the wall timeout: `yes` would spend 2 s of CPU before 5 s of wall time.
    tools = ToolRegistry(workspace_tools(settings(tmp_path / "ws", output_max_chars=1000, cpu_s=60)))
    endless = await call(tools, "shell", command="yes")
    assert endless.ok and endless.content.startswith("killed: still running after the wall timeout of 5 s")
    assert "[output truncated:" in endless.content and len(endless.content) < 1300


async def test_a_fork_bomb_is_contained_and_cleaned_up(tmp_path):
    tools = ToolRegistry(workspace_tools(settings(tmp_path / "ws", max_processes=16, wall_timeout_s=3)))
    before = sandbox_processes()
    # The bomb runs in a subshell forked before it: once the bomb fills the process limit, a shell that must
    # fork exits with "Cannot fork" (dash), and the command's own shell did so under load, ending the call
    # before the timeout. This one forks nothing more: it waits on its `sleep` until the sandbox ends the
    # call at the wall timeout, with every process of its session.
    bomb = await call(tools, "shell", command="sleep 60 & (bomb() { bomb | bomb & }; bomb); wait")
    assert bomb.ok and bomb.content.startswith("killed: still running after the wall timeout of 3 s"), bomb.content
    assert (await call(tools, "shell", command="echo alive")).content == "exit status 0\nalive\n"
    for _ in range(50):  # killed with the command; the kernel reaps them within moments
        if sandbox_processes() <= before:
            break
        await asyncio.sleep(0.1)
    assert sandbox_processes() <= before


async def test_cpu_memory_and_file_size_limits(tmp_path):
    # The wall timeout far above the CPU limit: on a loaded machine 1 s of CPU can take many seconds
    # of wall time, and the spin must be ended by the CPU limit (SIGXCPU), whatever the load.
    limits = settings(tmp_path / "ws", cpu_s=1, memory_mb=128, file_size_mb=1, wall_timeout_s=45)
    tools = ToolRegistry(workspace_tools(limits))
    spin = await call(tools, "python", code="while True: pass")
    assert spin.ok and spin.content.startswith("exit status 152 (SIGXCPU: CPU limit of 1 s)")
    hog = await call(tools, "python", code="x = bytearray(512 * 1024 * 1024)")
    assert hog.ok and "MemoryError" in hog.content
    big = await call(tools, "shell", command="head -c 3000000 /dev/zero > big; ls -l big")
    assert big.ok and "File size limit exceeded" in big.content and " 1048576 " in big.content  # cut at 1 MB
    too_big = await call(tools, "write_file", path="big2", content="a" * 2_000_000)
    assert not too_big.ok and too_big.retryable and "1 MB limit" in too_big.error
