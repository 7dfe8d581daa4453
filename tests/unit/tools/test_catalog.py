"""Which tools the executor publishes as needing approval."""

from __future__ import annotations

from agentstream.config import load_settings
from agentstream.contracts import ToolKind
from agentstream_tools.catalog import ApprovalPolicy


def test_nothing_needs_approval_by_default_except_the_workspace_tools():
    policy = ApprovalPolicy.of(load_settings().tools)
    assert policy.requires("shell", ToolKind.WORKSPACE) and policy.requires("write_file", ToolKind.WORKSPACE)
    assert not policy.requires("calculator", ToolKind.BUILTIN)
    assert not policy.requires("files__rm", ToolKind.MCP)
    assert not ApprovalPolicy().requires("shell", ToolKind.WORKSPACE)


def test_tools_are_selected_by_name_or_by_source():
    tools = load_settings(
        tools={
            "requires_approval": ["calculator", "files__*", "weather__alerts"],
            "sandbox": {"requires_approval": False},
        }
    ).tools
    policy = ApprovalPolicy.of(tools)
    assert policy.requires("calculator", ToolKind.BUILTIN)
    assert policy.requires("files__rm", ToolKind.MCP) and policy.requires("files__ls", ToolKind.MCP)
    assert policy.requires("weather__alerts", ToolKind.FUNCTION)
    assert not policy.requires("weather__forecast", ToolKind.FUNCTION)
    assert not policy.requires("clock", ToolKind.BUILTIN)
    assert not policy.requires("shell", ToolKind.WORKSPACE)


def test_an_mcp_server_can_mark_all_its_tools():
    servers = {"files": {"command": "files-mcp", "requires_approval": True}, "search": {"url": "http://s/mcp"}}
    policy = ApprovalPolicy.of(load_settings(tools={"mcp_servers": servers}).tools)
    assert policy.requires("files__rm", ToolKind.MCP) and policy.requires("files__ls", ToolKind.MCP)
    assert not policy.requires("search__query", ToolKind.MCP)
