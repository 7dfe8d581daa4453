"""The no-op tool `bench/tool_roundtrip.py` calls, twice over: a Python function tool
(`bench.noop_tools:noop`, served as `bench__noop`) and the same tool on an MCP stdio server
written with the SDK's FastMCP (`python -m bench.noop_tools`, served as `mcp__noop`).

Kept apart from the benchmark so that the tool-executor and the MCP server import only this.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

ANSWER = "ok"

server = MCPServer("agentstream-bench")


async def noop() -> str:
    """Do nothing and say so."""
    return ANSWER


@server.tool(name="noop")
async def mcp_noop() -> str:
    """Do nothing and say so."""
    return ANSWER


if __name__ == "__main__":
    server.run()
