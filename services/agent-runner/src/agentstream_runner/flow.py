"""The body of a run, shared by root and child runs: Create hook → model → ending.

Delegation (from a hook or the tool-loop fallback) runs a child under the same
root: its own run id, `parent_run_id`, `depth + 1`, events in the root's stream,
no `run.started`/`run.finished` of its own, usage added to the root's totals. A
cycle (A → B → A) or a depth over `MAX_DEPTH` is refused before it starts.
"""

from __future__ import annotations

from typing import Any

from agentstream.contracts import ChatMessage, MessageRole, StepType, new_id
from agentstream.tools_catalog import tool_spec
from agentstream_runner.ending import finish
from agentstream_runner.errors import RunFailure
from agentstream_runner.hooks import CreateInput, Delegate, call_create
from agentstream_runner.llm_step import llm_turn
from agentstream_runner.prompts import system_messages
from agentstream_runner.scope import MAX_DEPTH, Answer, RunScope
from agentstream_runner.steps import step


class DelegationRefused(RunFailure):
    pass


async def _apply_create_hook(scope: RunScope) -> Delegate | None:
    """Run the Create hook (if any) and apply what it changed to the scope."""
    if scope.hooks.create is None:
        return None
    step_input = {"assistant": scope.assistant.id, "messages": len(scope.memory)}
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
            unknown = [t for t in result.tools if tool_spec(t) is None]
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
    delegate = await _apply_create_hook(scope)
    if delegate is not None:
        if delegate.messages is None:
            delegate = Delegate(assistant=delegate.assistant, messages=_input_of(scope))
        return await run_child(scope, delegate)
    completion = await llm_turn(scope)
    return await finish(scope, completion, run_child)


def _input_of(scope: RunScope) -> list[ChatMessage]:
    """The parent's non-system messages: what the child answers."""
    return [m for m in scope.memory if m.role != MessageRole.SYSTEM]


def check_delegation(parent: RunScope, assistant_id: str) -> None:
    if assistant_id in parent.chain:
        path = " → ".join((*parent.chain, assistant_id))
        raise DelegationRefused(f"delegation refused: cycle {path}")
    depth = parent.events.depth + 1
    if depth > MAX_DEPTH:
        raise DelegationRefused(f"delegation refused: depth {depth} is over the limit of {MAX_DEPTH}")


async def run_child(parent: RunScope, delegate: Delegate) -> Answer:
    check_delegation(parent, delegate.assistant)
    ctx = parent.ctx
    assistant = ctx.assistants.get(delegate.assistant)
    child_id = new_id()
    events = parent.events.child(child_id)
    messages = list(delegate.messages or [])
    step_input: dict[str, Any] = {"assistant": assistant.id, "child_run_id": child_id, "messages": len(messages)}
    async with step(parent.events, StepType.DELEGATE, parent.step_id(StepType.DELEGATE), step_input) as record:
        child = RunScope(
            ctx=ctx,
            start=parent.start,
            events=events,
            totals=parent.totals,
            assistant=assistant,
            hooks=ctx.assistants.hooks(assistant.id),
            connector=ctx.connectors.resolve(None, assistant.connector, parent.overrides),
            overrides=parent.overrides,
            memory=[*system_messages(assistant, parent.start, parent.metadata), *messages],
            options={**assistant.options},
            metadata=dict(parent.metadata),
            tool_names=list(assistant.tools),
            chain=(*parent.chain, assistant.id),
        )
        answer = await execute(child)
        record.output = {"text": answer.text, "data": answer.data}
        record.memory = parent.memory
    return answer
