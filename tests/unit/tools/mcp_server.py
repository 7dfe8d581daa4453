"""A real MCP server for the tool-executor's tests, written with the SDK's server (FastMCP,
`MCPServer` in mcp 2). Run as a script: stdio by default, `--http PORT` for streamable HTTP
on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentstream-test")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """The server process dies in the middle of this call."""
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after `seconds`."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def hang() -> str:
    """Blocks the server's event loop: it answers nothing any more, not even pings."""
    time.sleep(3600)  # noqa: ASYNC251 - blocking the loop is the point
    return "never"


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server process."""
    return os.environ.get(name, "")


@server.tool()
def pid() -> int:
    """The server's process id: tells a restarted server from the first one."""
    return os.getpid()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
