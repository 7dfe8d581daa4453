"""The body of a run, shared by root and child runs: Create hook → model → ending.

A delegation (from a hook or the tool-loop fallback) runs this same body for the
child (see `delegation.py`).
"""

from __future__ import annotations

from agentstream.contracts import StepType
from agentstream.contracts.steps import HookCreateStepInput
from agentstream.tools_catalog import is_tool_selector
from agentstream_runner.delegation import delegate_to
from agentstream_runner.emitter import step
from agentstream_runner.ending import finish
from agentstream_runner.hooks import CreateInput, Delegate, call_create
from agentstream_runner.llm_step import Completion, llm_turn
from agentstream_runner.outcome import RunFailure
from agentstream_runner.scope import Answer, RunScope


async def _apply_create_hook(scope: RunScope) -> Delegate | None:
    """Run the Create hook (if any) and apply what it changed to the scope."""
    if scope.hooks.create is None:
        return None
    step_input = HookCreateStepInput(assistant=scope.assistant.id, messages=len(scope.memory)).as_json()
    async with step(scope.events, StepType.HOOK_CREATE, scope.step_id(StepType.HOOK_CREATE), step_input) as record:
        result = await call_create(
            scope.hooks.create,
            CreateInput(
                messages=list(scope.memory),
                options=dict(scope.options),
                metadata=dict(scope.metadata),
                assistant_id=scope.assistant.id,
                start=scope.start,
            ),
        )
        if result.messages is not None:
            scope.memory = list(result.messages)
        if result.options is not None:
            scope.options = {**scope.options, **result.options}
        if result.metadata is not None:
            scope.metadata = {**scope.metadata, **result.metadata}
        if result.tools is not None:
            unknown = [t for t in result.tools if not is_tool_selector(t)]
            if unknown:
                raise RunFailure(f"create hook chose unknown tools: {unknown}")
            scope.tool_names = list(result.tools)
        if result.connector is not None:
            # A new connector brings its own capabilities (tools sent or not, ...).
            scope.connector = scope.ctx.connectors.resolve(result.connector, None, scope.overrides)
        record.output = result.model_dump(exclude_none=True, mode="json")
        record.memory = scope.memory
    return result.delegate


async def execute(scope: RunScope) -> Answer:
    """Create hook → (delegate | model call) → the run's one ending."""
    if scope.resumed_approval is not None and (paused := scope.memory[-1]).tool_calls:
        # Resumed while tool calls waited for approval: back to that round, the model's calls as made.
        return await finish(scope, Completion(paused.content or "", list(paused.tool_calls)), run_child)
    delegate = await _apply_create_hook(scope)
    if delegate is not None:
        if delegate.messages is None:
            delegate = Delegate(assistant=delegate.assistant, messages=scope.conversation())
        return await run_child(scope, delegate)
    completion = await llm_turn(scope)
    return await finish(scope, completion, run_child)


async def run_child(parent: RunScope, delegate: Delegate) -> Answer:
    """The answer of the assistant `delegate` names, run as a child of `parent`."""
    return await delegate_to(parent, delegate, execute)
