"""MCP servers through the official SDK: a real server (tests/unit/tools/mcp_server.py, written with
the SDK's FastMCP/MCPServer) over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentstream.config.tools import McpServerSettings
from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.kafka import free_port
from agentstream_tools.executor import execute
from agentstream_tools.mcp_servers import McpServer, McpServers
from agentstream_tools.registry import ToolRegistry

# Each test starts MCP server processes and waits out their timeouts and restarts.
pytestmark = pytest.mark.timeout(60)

SERVER = str(Path(__file__).with_name("mcp_server.py"))
FAST = {"reconnect_min_s": 0.1, "reconnect_max_s": 0.5, "connect_timeout_s": 15.0}


def stdio(**kw) -> McpServerSettings:
    return McpServerSettings(command=sys.executable, args=[SERVER], **(FAST | kw))


def http(port: int, **kw) -> McpServerSettings:
    return McpServerSettings(url=f"http://127.0.0.1:{port}/mcp", **(FAST | kw))


async def call(registry: ToolRegistry, tool: str, **args) -> ToolCallResult:
    request = ToolCallRequest(
        run_id="r1", root_run_id="r1", conversation_key="web:c", call_id="c1", tool=tool, arguments=json.dumps(args)
    )
    return await execute(registry, request, default_timeout_s=10)


async def eventually_ok(registry: ToolRegistry, tool: str, within_s: float = 20, **args) -> ToolCallResult:
    deadline = time.monotonic() + within_s
    while True:
        result = await call(registry, tool, **args)
        if result.ok or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.2)


@pytest.fixture
async def served() -> AsyncIterator[tuple[ToolRegistry, McpServers]]:
    registry = ToolRegistry()
    servers = McpServers({"t": stdio(call_timeout_s=1.0)}, registry)
    await servers.start()
    yield registry, servers
    await servers.stop()


def start_http_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the MCP test server did not listen")


@pytest.fixture
def http_port() -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    port, procs = free_port(), []
    procs.append(start_http_server(port))
    yield port, procs
    for p in procs:
        p.kill()
        p.wait()


async def test_stdio_tools_are_listed_as_server__tool_with_their_schema(served):
    registry, _ = served
    assert {"t__echo", "t__add", "t__fail", "t__crash", "t__slow", "t__pid"} <= set(registry.names())
    add = registry.get("t__add")
    assert add is not None and add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"] and add.parameters["properties"]["a"]["type"] == "integer"


async def test_stdio_call_answers(served):
    registry, _ = served
    result = await call(registry, "t__add", a=2, b=40)
    assert (result.ok, result.content) == (True, "42")


async def test_a_tool_error_is_a_non_retryable_result_with_its_text(served):
    registry, _ = served
    result = await call(registry, "t__fail", message="no such city")
    assert not result.ok and not result.retryable
    assert result.error.startswith("t__fail failed: ") and result.error.endswith("no such city")


async def test_arguments_are_checked_against_the_servers_schema(served):
    registry, _ = served
    result = await call(registry, "t__add", a=1, b="two")
    assert not result.ok and result.retryable and "field 'b'" in result.error


async def test_a_crash_mid_call_is_a_clear_error_and_the_server_is_restarted(served):
    registry, servers = served
    first = await call(registry, "t__pid")
    crashed = await call(registry, "t__crash")
    assert not crashed.ok and not crashed.retryable
    assert "MCP server 't' went away during the call" in crashed.error
    again = await eventually_ok(registry, "t__pid")
    assert again.ok and again.content != first.content  # a new server process answers
    assert servers.servers["t"].connected


async def test_a_slow_call_past_its_timeout_ends_as_a_timeout_and_the_server_stays_usable(served):
    registry, _ = served
    slow = await call(registry, "t__slow", seconds=5)
    assert not slow.ok and not slow.retryable and "timed out after 1 s" in slow.error
    assert (await call(registry, "t__echo", text="still here")).content == "still here"


async def test_a_hung_server_is_noticed_after_a_timed_out_call_and_restarted():
    registry = ToolRegistry()
    server = McpServer("t", stdio(call_timeout_s=1, connect_timeout_s=10, ping_interval_s=600), registry)
    await server.start()
    try:
        first = await call(registry, "t__pid")
        hung = await call(registry, "t__hang")
        assert not hung.ok and not hung.retryable and "timed out after 1 s" in hung.error
        again = await eventually_ok(registry, "t__pid", within_s=90)  # the ping after the timeout went unanswered
        assert again.ok and again.content != first.content
    finally:
        await server.stop()


async def test_calls_beyond_the_concurrency_limit_wait_their_turn():
    registry = ToolRegistry()
    servers = McpServers({"t": stdio(max_concurrency=1, call_timeout_s=5)}, registry)
    await servers.start()
    try:
        started = time.monotonic()
        results = await asyncio.gather(*(call(registry, "t__slow", seconds=0.4) for _ in range(3)))
        assert all(r.ok for r in results)
        assert time.monotonic() - started >= 1.2  # one at a time
    finally:
        await servers.stop()


async def test_stdio_env_and_passed_secrets_reach_the_server(monkeypatch):
    monkeypatch.setenv("MCP_TEST_SECRET", "s3cret")
    registry = ToolRegistry()
    servers = McpServers({"t": stdio(env={"PLAIN": "p"}, pass_env=["MCP_TEST_SECRET"])}, registry)
    await servers.start()
    try:
        assert (await call(registry, "t__env", name="PLAIN")).content == "p"
        assert (await call(registry, "t__env", name="MCP_TEST_SECRET")).content == "s3cret"
    finally:
        await servers.stop()


async def test_a_server_that_cannot_start_does_not_stop_the_others():
    registry = ToolRegistry()
    servers = McpServers(
        {"t": stdio(), "broken": McpServerSettings(command="/nonexistent/mcp-server", connect_timeout_s=1)}, registry
    )
    await servers.start()
    try:
        assert "t__echo" in registry.names() and not any(n.startswith("broken__") for n in registry.names())
        assert (await call(registry, "t__echo", text="ok")).ok
    finally:
        await servers.stop()
    assert registry.names() == []


async def test_http_list_call_and_error(http_port):
    port, _ = http_port
    registry = ToolRegistry()
    servers = McpServers({"h": http(port, headers={"X-Test": "1"})}, registry)
    await servers.start()
    try:
        assert "h__add" in registry.names()
        assert (await call(registry, "h__add", a=1, b=2)).content == "3"
        failed = await call(registry, "h__fail", message="nope")
        assert not failed.ok and not failed.retryable and failed.error.endswith("nope")
    finally:
        await servers.stop()


async def test_http_slow_call_past_its_timeout(http_port):
    port, _ = http_port
    registry = ToolRegistry()
    servers = McpServers({"h": http(port, call_timeout_s=0.5)}, registry)
    await servers.start()
    try:
        slow = await call(registry, "h__slow", seconds=5)
        assert not slow.ok and not slow.retryable and "timed out" in slow.error
        assert (await call(registry, "h__echo", text="x")).content == "x"
    finally:
        await servers.stop()


async def test_http_server_crash_mid_call_and_restart(http_port):
    port, procs = http_port
    registry = ToolRegistry()
    server = McpServer("h", http(port), registry)
    await server.start()
    try:
        first = await call(registry, "h__pid")
        crashed = await call(registry, "h__crash")
        assert not crashed.ok and not crashed.retryable and "MCP server 'h'" in crashed.error
        procs[0].wait(timeout=10)
        down = await call(registry, "h__echo", text="x")
        assert not down.ok and not down.retryable and "MCP server 'h'" in down.error
        procs.append(start_http_server(port))  # the same server comes back on the same URL
        again = await eventually_ok(registry, "h__pid")
        assert again.ok and again.content != first.content
    finally:
        await server.stop()


async def test_a_server_started_late_is_connected_when_it_comes_up():
    port = free_port()
    registry = ToolRegistry()
    server = McpServer("h", http(port, connect_timeout_s=0.5), registry)
    await server.start()  # nothing listens yet: start returns, the supervisor keeps trying
    proc = None
    try:
        assert registry.names() == []
        proc = start_http_server(port)
        assert (await eventually_ok(registry, "h__echo", text="late")).content == "late"
    finally:
        await server.stop()
        if proc is not None:
            proc.kill()
            proc.wait()
