"""A step's `input`/`output` built from the models in `contracts/steps.py` is the JSON object it
always was, and a `step.*` event in the old JSON shape still decodes into them."""

from __future__ import annotations

import json

from agentstream.contracts import RunEventAdapter, StepCompleted, ToolCallSpec, Usage
from agentstream.contracts.steps import (
    ApprovalStepInput,
    DelegateStepInput,
    DelegateStepOutput,
    HookCreateStepInput,
    LlmStepInput,
    LlmStepOutput,
    ToolStepInput,
    ToolStepOutput,
    ToolStepResult,
)

CALL = ToolCallSpec(id="c1", name="clock", arguments="{}")


def test_each_step_value_is_the_json_object_it_was() -> None:
    # The dicts the runner built by hand before the models existed.
    usage = Usage(prompt_tokens=3, completion_tokens=2, llm_calls=1)
    cases = [
        (HookCreateStepInput(assistant="a", messages=2), {"assistant": "a", "messages": 2}),
        (
            LlmStepInput(connector="c", messages=2, tools=["clock"]),
            {"connector": "c", "messages": 2, "tools": ["clock"]},
        ),
        (
            LlmStepOutput(text="hi", tool_calls=[CALL], usage=usage),
            {"text": "hi", "tool_calls": [CALL.model_dump()], "usage": usage.model_dump()},
        ),
        (ToolStepInput(attempt=1, calls=[CALL]), {"attempt": 1, "calls": [CALL.model_dump()]}),
        (
            ToolStepOutput(results=[ToolStepResult(call_id="c1", tool="clock", ok=False, error="boom")]),
            {"results": [{"call_id": "c1", "tool": "clock", "ok": False, "content": "", "error": "boom"}]},
        ),
        (ApprovalStepInput(calls=["c1"]), {"calls": ["c1"]}),
        (
            DelegateStepInput(assistant="b", child_run_id="r2", messages=0),
            {"assistant": "b", "child_run_id": "r2", "messages": 0},
        ),
        (DelegateStepOutput(text="done", data={"k": 1}), {"text": "done", "data": {"k": 1}}),
    ]
    for model, old in cases:
        assert json.loads(json.dumps(model.as_json())) == json.loads(json.dumps(old)), type(model).__name__


# A `step.completed` of an `llm` step as a runner wrote it before the models existed.
OLD_LLM_STEP = json.dumps(
    {
        "type": "step.completed",
        "run_id": "r1",
        "root_run_id": "r1",
        "conversation_key": "web:c1",
        "seq": 4,
        "step_id": "llm-1",
        "step_type": "llm",
        "input": {"connector": "demo", "messages": 1, "tools": []},
        "output": {
            "text": "hi",
            "tool_calls": [],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1, "llm_calls": 1},
        },
        "memory": [],
    }
)


def test_an_old_step_record_decodes_into_the_models() -> None:
    event = RunEventAdapter.validate_json(OLD_LLM_STEP)
    assert isinstance(event, StepCompleted)
    assert LlmStepInput.model_validate(event.input).connector == "demo"
    assert LlmStepOutput.model_validate(event.output).usage == Usage(prompt_tokens=7, completion_tokens=1, llm_calls=1)
    assert LlmStepOutput.model_validate({}).usage == Usage()  # an output that never said its usage
