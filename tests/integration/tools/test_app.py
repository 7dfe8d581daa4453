"""tool-executor on the real broker: results keyed by conversation, bad records to the dlq."""

from agentstream.contracts import DeadLetter, ToolCallRequest, ToolCallResult
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_testing.signed_calls import signed
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor


def request(call_id: str, tool: str, arguments: str, key: str) -> ToolCallRequest:
    return signed(
        ToolCallRequest(
            run_id="r1", root_run_id="r1", conversation_key=key, call_id=call_id, tool=tool, arguments=arguments
        )
    )


async def test_calls_are_answered_and_bad_records_dead_lettered(settings_factory, topics_created):
    settings = settings_factory()
    svc = bootstrap_tool_executor(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    calls = [request("c1", "calculator", '{"expression": "2**10"}', "web:a"), request("c2", "weather", "{}", "web:b")]

    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        await produce_raw(bootstrap, t.tool_calls, b'{"type": "tool.call_request"}', key=b"web:a")
        for call in calls:
            await produce_raw(bootstrap, t.tool_calls, call.to_json(), key=call.conversation_key.encode())
        records = await read_until(bootstrap, t.tool_results, lambda rs: len(rs) >= 2)
        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= 1)

    results = {ToolCallResult.model_validate_json(r.value).call_id: (r.key, r) for r in records}
    ok = ToolCallResult.model_validate_json(results["c1"][1].value)
    assert results["c1"][0] == b"web:a" and (ok.ok, ok.content) == (True, "1024")
    unknown = ToolCallResult.model_validate_json(results["c2"][1].value)
    assert results["c2"][0] == b"web:b" and not unknown.ok and unknown.retryable
    assert "available tools: calculator, clock" in unknown.error

    [letter] = [DeadLetter.model_validate_json(r.value) for r in dlq]
    assert letter.service == "tool-executor" and letter.error.startswith("invalid ToolCallRequest")
    assert "run_id: Field required" in letter.error
