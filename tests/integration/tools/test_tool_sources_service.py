"""tool-executor on the real broker with every tool source configured: an MCP server (stdio),
a function group and the workspace tools answer `tool-calls`; a bad function path does not stop it."""

import json
import sys
import textwrap
from pathlib import Path

from structlog.testing import capture_logs

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_testing.signed_calls import signed
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

MCP_SERVER = str(Path(__file__).parents[2] / "unit" / "tools" / "mcp_server.py")


def request(call_id: str, tool: str, arguments: dict) -> ToolCallRequest:
    call = ToolCallRequest(
        run_id="r1",
        root_run_id="r1",
        conversation_key="web:a",
        call_id=call_id,
        tool=tool,
        arguments=json.dumps(arguments),
    )
    return signed(call, approval_id="a1")  # as the runner sends it once a person approved (the workspace tools ask)


async def test_mcp_function_and_workspace_tools_answer_through_kafka(
    settings_factory, topics_created, tmp_path, monkeypatch
):
    (tmp_path / "shop_tools.py").write_text(
        textwrap.dedent('''
        def price(item: str, quantity: int = 1) -> float:
            """Price of an item.

            Args:
                item: What to buy.
                quantity: How many.
            """
            return 2.5 * quantity
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = settings_factory(
        tools={
            "mcp_servers": {"demo": {"command": sys.executable, "args": [MCP_SERVER], "connect_timeout_s": 60}},
            "functions": {"shop": ["shop_tools.price", "shop_tools_missing.price"]},
            "sandbox": {"enabled": True, "root_dir": str(tmp_path / "ws"), "wall_timeout_s": 10},
        }
    )
    with capture_logs() as logs:
        svc = bootstrap_tool_executor(settings)
    [bad] = [e for e in logs if e["event"] == "function tool not loaded"]
    assert bad["path"] == "shop_tools_missing.price" and bad["error"].startswith("ModuleNotFoundError")
    calls = [
        request("c1", "demo__add", {"a": 20, "b": 22}),
        request("c2", "shop__price", {"item": "apple", "quantity": 4}),
        request("c3", "shell", {"command": "echo hi > f.txt && cat f.txt"}),
        request("c4", "demo__fail", {"message": "not today"}),
    ]
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        assert {"demo__add", "shop__price", "shell", "read_file"} <= set(svc.tools.names())
        for call in calls:
            await produce_raw(
                settings.kafka.bootstrap_servers,
                svc.topics.tool_calls,
                call.to_json(),
                key=call.conversation_key.encode(),
            )
        records = await read_until(settings.kafka.bootstrap_servers, svc.topics.tool_results, lambda rs: len(rs) >= 4)
    results = {r.call_id: r for r in (ToolCallResult.model_validate_json(rec.value) for rec in records)}
    assert (results["c1"].ok, results["c1"].content) == (True, "42")
    assert (results["c2"].ok, results["c2"].content) == (True, "10.0")
    assert (results["c3"].ok, results["c3"].content) == (True, "exit status 0\nhi\n")
    assert not results["c4"].ok and not results["c4"].retryable and results["c4"].error.endswith("not today")
