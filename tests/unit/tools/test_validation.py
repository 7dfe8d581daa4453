"""Execution results and their classification: by error type, never by message."""

import asyncio
import json
from datetime import timedelta

import pytest
from structlog.testing import capture_logs

from agentstream.contracts import ToolCallRequest, utcnow
from agentstream.observability import get_logger
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.executor import execute
from agentstream_tools.registry import Tool, ToolRegistry
from agentstream_tools.validation import ArgumentError

OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


async def _slow(args):
    await asyncio.sleep(10)
    return "never"


async def _boom(args):
    # The message looks like an argument problem; the type (RuntimeError) decides: not retryable.
    raise RuntimeError("invalid arguments, please retry")


async def _leaks(args):
    raise FileNotFoundError(2, "No such file or directory", "/nonexistent-dir/site-packages/x.py")


async def _rejects(args):
    raise ArgumentError("n must be even")


def registry() -> ToolRegistry:
    return ToolRegistry(
        [
            *builtin_tools(),
            Tool("slow", "sleeps", OBJECT, _slow, timeout_s=0.05),
            Tool("boom", "raises", OBJECT, _boom),
            Tool("leaky", "raises with a path", OBJECT, _leaks),
            Tool("picky", "rejects", OBJECT, _rejects),
        ]
    )


def request(tool: str, arguments: str, **kw) -> ToolCallRequest:
    return ToolCallRequest(
        run_id="r1", root_run_id="r1", conversation_key="web:c1", call_id="call_1", tool=tool, arguments=arguments, **kw
    )


async def run(tool: str, arguments: str = "{}", **kw):
    return await execute(registry(), request(tool, arguments, **kw), default_timeout_s=5)


async def test_success_carries_the_call_identity():
    result = await run("calculator", '{"expression": "6*7"}')
    assert (result.ok, result.content, result.error) == (True, "42", None)
    assert (result.run_id, result.root_run_id, result.call_id, result.tool) == ("r1", "r1", "call_1", "calculator")
    assert result.conversation_key == "web:c1"


async def test_unknown_tool_is_retryable_and_lists_the_tools():
    result = await run("weather")
    assert not result.ok and result.retryable
    assert result.error == "unknown tool 'weather'; available tools: boom, calculator, clock, leaky, picky, slow"


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"expression": ', "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ("{}", "field 'expression' is required"),
        ('{"expression": 5}', "field 'expression' 5 is not of type 'string'"),
        ('{"expression": "1", "x": 1}', "field 'x' is not a parameter of calculator (parameters: expression)"),
    ],
)
async def test_bad_arguments_are_retryable_with_the_reason(arguments, says):
    result = await run("calculator", arguments)
    assert not result.ok and result.retryable
    assert says in result.error


async def test_argument_error_raised_by_a_tool_is_retryable():
    result = await run("picky")
    assert not result.ok and result.retryable and result.error == "n must be even"


async def test_tool_exception_is_not_retryable_whatever_its_message():
    result = await run("boom")
    assert not result.ok and not result.retryable
    assert result.error == "the tool failed unexpectedly (RuntimeError)"


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    # structlog caches a logger on first use once logging is configured (another test may have done it);
    # a cached logger bypasses `capture_logs`, so the executor gets an uncached one here.
    from agentstream_tools import executor

    monkeypatch.setattr(executor, "log", get_logger("agentstream.tool-executor").bind())


async def test_unexpected_exception_reaches_the_model_as_its_type_and_the_log_in_full(fresh_log: None):
    with capture_logs() as logs:
        result = await run("leaky")
    assert result.error == "the tool failed unexpectedly (FileNotFoundError)" and not result.retryable
    [entry] = [e for e in logs if e["event"] == "tool raised"]
    assert (entry["run_id"], entry["call_id"], entry["tool"], entry["conversation_key"]) == (
        "r1",
        "call_1",
        "leaky",
        "web:c1",
    )
    assert isinstance(entry["exc_info"], FileNotFoundError) and "/nonexistent-dir/" in str(entry["exc_info"])


async def test_a_tool_failure_is_not_logged_as_unexpected(fresh_log: None):
    with capture_logs() as logs:
        await run("picky")
    assert not [e for e in logs if e["event"] == "tool raised"]


@pytest.mark.parametrize("zone", ["x" * 5000, "America", "Europe/../../etc", "a" * 300 + "/b", "\udcff", "..."])
async def test_a_bad_timezone_is_a_short_error_without_paths(zone):
    result = await run("clock", json.dumps({"timezone": zone}))
    assert not result.ok and result.retryable
    assert result.error.startswith("unknown timezone ") and len(result.error) < 150
    assert not any(leak in result.error for leak in ("site-packages", "tzdata", "Errno", "Error"))


async def test_error_texts_quote_input_briefly():
    unknown = await run("w" * 128)  # the longest name the contract lets through
    assert unknown.error.startswith("unknown tool 'www") and "…" in unknown.error and len(unknown.error) < 300
    calc = await run("calculator", json.dumps({"expression": "(" * 400}))
    assert calc.retryable and len(calc.error) < 200
    schema = await run("calculator", json.dumps({"expression": ["y" * 5000]}))
    assert schema.retryable and len(schema.error) <= 300


async def test_division_by_zero_is_not_retryable():
    result = await run("calculator", '{"expression": "1/0"}')
    assert (result.ok, result.retryable, result.error) == (False, False, "division by zero")


async def test_timeout_is_not_retryable_and_bounded():
    result = await run("slow")
    assert not result.ok and not result.retryable
    # Ended by the tool's own 0.05 s timeout (the sleep would have taken 10 s and answered "never").
    assert result.error == "tool slow timed out after 0.05 s"
    assert result.duration_ms >= 40


async def test_passed_deadline_is_not_run():
    result = await run("calculator", '{"expression": "1+1"}', deadline=utcnow() - timedelta(seconds=1))
    assert not result.ok and not result.retryable and "deadline" in result.error


async def test_duration_is_measured():
    ticks = iter([10.0, 10.25])
    result = await execute(registry(), request("calculator", '{"expression": "1"}'), 5, clock=lambda: next(ticks))
    assert result.duration_ms == pytest.approx(250.0)


def test_registry_rejects_duplicates_and_bad_schemas():
    with pytest.raises(ValueError, match="twice"):
        ToolRegistry([*builtin_tools(), *builtin_tools()])
    with pytest.raises(Exception, match="is not valid"):
        ToolRegistry([Tool("bad", "bad schema", {"type": 5}, _boom)])
