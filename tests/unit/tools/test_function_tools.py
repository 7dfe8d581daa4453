"""Python function tools by dotted path: schema from hints and docstring, validated arguments,
sync and async, and a bad module reported with its path while the others load."""

from __future__ import annotations

import json
import textwrap

import pytest
from structlog.testing import capture_logs

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream_tools.executor import execute
from agentstream_tools.function_tools import load_function_tools
from agentstream_tools.registry import ToolRegistry

WEATHER = '''
    import asyncio
    import threading
    from datetime import date
    from typing import Literal

    from pydantic import BaseModel

    from agentstream_tools.validation import ToolError


    class Place(BaseModel):
        city: str
        country: str = "NO"


    def forecast(place: Place, day: date, units: Literal["metric", "imperial"] = "metric") -> dict:
        """The weather forecast for one day.

        Args:
            place: Where to look.
            day: Which day (ISO date).
            units: Unit system of the
                temperatures.
        """
        return {"city": place.city, "weekday": day.strftime("%A"), "units": units, "thread": threading.current_thread().name}


    async def slow_echo(text: str, times: int = 1) -> str:
        """Echo the text.

        :param text: What to say.
        :param times: How often.
        """
        await asyncio.sleep(0)
        return " ".join([text] * times)


    def refuse(reason: str) -> str:
        """Always refuses."""
        raise ToolError(reason)


    def splat(*args) -> str:
        return "never"
'''


@pytest.fixture
def modules(tmp_path, monkeypatch):
    (tmp_path / "weather_tools.py").write_text(textwrap.dedent(WEATHER))
    (tmp_path / "broken_tools.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def load(*paths: str):
    return load_function_tools({"wx": list(paths)})


async def call(registry: ToolRegistry, tool: str, arguments: dict | str) -> ToolCallResult:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    request = ToolCallRequest(
        run_id="r1", root_run_id="r1", conversation_key="web:c", call_id="c1", tool=tool, arguments=raw
    )
    return await execute(registry, request, default_timeout_s=5)


def test_schema_and_description_come_from_hints_and_docstring(modules):
    (forecast, echo), problems = load("weather_tools.forecast", "weather_tools:slow_echo")
    assert problems == []
    assert forecast.name == "wx__forecast" and forecast.description == "The weather forecast for one day."
    props = forecast.parameters["properties"]
    assert props["day"] == {"description": "Which day (ISO date).", "format": "date", "title": "Day", "type": "string"}
    assert props["units"]["enum"] == ["metric", "imperial"] and props["units"]["default"] == "metric"
    assert props["units"]["description"] == "Unit system of the temperatures."
    assert forecast.parameters["required"] == ["place", "day"]
    assert forecast.parameters["additionalProperties"] is False
    assert "Place" in forecast.parameters["$defs"]
    assert (
        echo.description == "Echo the text." and echo.parameters["properties"]["times"]["description"] == "How often."
    )


async def test_a_sync_function_runs_in_a_worker_thread_with_converted_arguments(modules):
    registry = ToolRegistry(load("weather_tools.forecast")[0])
    result = await call(registry, "wx__forecast", {"place": {"city": "Oslo"}, "day": "2026-12-03"})
    assert result.ok
    answer = json.loads(result.content)
    assert answer["city"] == "Oslo" and answer["weekday"] == "Thursday" and answer["units"] == "metric"
    assert answer["thread"] != "MainThread"


async def test_an_async_function_is_awaited(modules):
    registry = ToolRegistry(load("weather_tools.slow_echo")[0])
    result = await call(registry, "wx__slow_echo", {"text": "hi", "times": 3})
    assert (result.ok, result.content) == (True, "hi hi hi")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"place": {"city": "Oslo"}}, "field 'day' is required"),
        ({"place": {"city": "Oslo"}, "day": "tomorrow"}, "field 'day'"),
        ({"place": {"town": "Oslo"}, "day": "2026-12-03"}, "field 'place"),
        ({"place": {"city": "Oslo"}, "day": "2026-12-03", "units": "kelvin"}, "field 'units'"),
    ],
)
async def test_invalid_arguments_are_retryable_and_name_the_field(modules, arguments, field):
    registry = ToolRegistry(load("weather_tools.forecast")[0])
    result = await call(registry, "wx__forecast", arguments)
    assert not result.ok and result.retryable
    assert field in result.error


async def test_a_tool_error_from_the_function_reaches_the_model(modules):
    registry = ToolRegistry(load("weather_tools.refuse")[0])
    result = await call(registry, "wx__refuse", {"reason": "no data for the poles"})
    assert (result.ok, result.retryable, result.error) == (False, False, "no data for the poles")


def test_bad_paths_are_reported_with_their_path_and_the_others_load(modules):
    with capture_logs() as logs:
        tools, problems = load(
            "broken_tools.oops",  # a syntax error in the module
            "weather_tools.forecast",
            "missing_module.fn",
            "weather_tools.nothing_here",
            "weather_tools.splat",  # *args cannot be described
            "weather_tools:slow_echo",
            "weather_tools.slow_echo",  # the same name twice in one group
        )
    assert [t.name for t in tools] == ["wx__forecast", "wx__slow_echo"]
    assert {p.path: p.error.split(":")[0] for p in problems} == {
        "broken_tools.oops": "SyntaxError",
        "missing_module.fn": "ModuleNotFoundError",
        "weather_tools.nothing_here": "AttributeError",
        "weather_tools.splat": "TypeError",
        "weather_tools.slow_echo": "ValueError",
    }
    reported = [e for e in logs if e["event"] == "function tool not loaded"]
    assert {e["path"] for e in reported} == set({p.path for p in problems})
    assert all(e["log_level"] == "error" and e["group"] == "wx" for e in reported)
