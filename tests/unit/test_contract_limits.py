"""Field limits of the run-scoped contracts: what the database columns cannot hold is refused at decode."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agentstream.contracts import RunCommandAdapter, RunEventAdapter
from agentstream.contracts.limits import MAX_JSON_DEPTH, json_depth
from agentstream.contracts.tools import ToolCallRequestAdapter

IDS = {"run_id": "r1", "root_run_id": "r1", "conversation_key": "web:c1", "seq": 1}
TARGET = {"platform": "web", "chat_id": "c1"}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def event(**fields: object) -> bytes:
    return json.dumps({**IDS, **fields}).encode()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (event(type="run.finished", status="failed", run_id="r" * 65), "run_id"),
        (event(type="run.finished", status="failed", root_run_id="r" * 65), "root_run_id"),
        (event(type="run.finished", status="failed", parent_run_id="r" * 65), "parent_run_id"),
        (event(type="run.finished", status="failed", conversation_key="k" * 513), "conversation_key"),
        (event(type="run.finished", status="failed", id="i" * 65), "id"),
        (event(type="tool.call", call_id="c" * 129, tool="t", arguments="{}"), "call_id"),
        (event(type="tool.call", call_id="c", tool="t" * 129, arguments="{}"), "tool"),
        (event(type="run.queued", assistant_id="a" * 129, reply_target=TARGET), "assistant_id"),
        (event(type="run.queued", assistant_id="a", reply_target=TARGET, user_id="u" * 257), "user_id"),
        (event(type="run.started", assistant_id="a", connector_id="c" * 129, reply_target=TARGET), "connector_id"),
        (
            event(type="run.started", assistant_id="a", connector_id="c", reply_target=TARGET, session_id="s" * 65),
            "session_id",
        ),
        (
            event(
                type="run.started",
                assistant_id="a",
                connector_id="c",
                reply_target={"platform": "p" * 65, "chat_id": "c"},
            ),
            "reply_target.platform",
        ),
        (event(type="step.completed", step_id="s" * 129, step_type="llm"), "step_id"),
    ],
)
def test_over_long_event_fields_are_refused(raw: bytes, field: str):
    with pytest.raises(ValidationError) as err:
        RunEventAdapter.validate_json(raw)
    assert any(
        ".".join(str(p) for p in e["loc"]).endswith(field) and e["type"] == "string_too_long"
        for e in err.value.errors()
    ), err.value


def test_the_widest_values_still_fit():
    ok = event(
        type="run.finished",
        status="failed",
        run_id="r" * 64,
        root_run_id="r" * 64,
        conversation_key="k" * 512,
        reason="runner_lost",
    )
    assert RunEventAdapter.validate_json(ok).run_id == "r" * 64


@pytest.mark.parametrize(
    "command",
    [
        {
            "type": "run.start",
            "run_id": "r" * 65,
            "conversation_key": "k",
            "assistant_id": "a",
            "text": "t",
            "reply_target": TARGET,
        },
        {
            "type": "run.start",
            "run_id": "r",
            "conversation_key": "k" * 513,
            "assistant_id": "a",
            "text": "t",
            "reply_target": TARGET,
        },
        {"type": "run.interrupt", "conversation_key": "k" * 513},
        {"type": "run.resume", "conversation_key": "k", "run_id": "r" * 65},
    ],
)
def test_over_long_run_commands_are_refused(command: dict[str, object]):
    with pytest.raises(ValidationError, match="string_too_long"):
        RunCommandAdapter.validate_python(command)


def test_tool_arguments_nested_too_deep_are_refused_everywhere():
    deep = json.dumps({"a": json.loads(nested(MAX_JSON_DEPTH))})  # 65 levels with the object
    with pytest.raises(ValidationError, match="nested 65 levels deep; at most 64"):
        RunEventAdapter.validate_json(event(type="tool.call", call_id="c", tool="t", arguments=deep))
    with pytest.raises(ValidationError, match="at most 64"):
        ToolCallRequestAdapter.validate_python({**IDS, "call_id": "c", "tool": "t", "arguments": nested(5000)})
    assistant = {"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "arguments": nested(100)}]}
    with pytest.raises(ValidationError, match="at most 64"):
        RunEventAdapter.validate_json(event(type="step.completed", step_id="s", step_type="llm", memory=[assistant]))
    fits = nested(MAX_JSON_DEPTH)
    assert RunEventAdapter.validate_json(event(type="tool.call", call_id="c", tool="t", arguments=fits))


def test_json_depth_ignores_brackets_in_strings_and_measures_non_json():
    assert json_depth('{"a": "[[[[[[", "b": [1, {"c": 2}]}') == 3
    assert json_depth(r'{"a": "\"[[[["}') == 1
    assert json_depth("not json [[[ at all") == 3
    assert json_depth(nested(5000)) == 5000
