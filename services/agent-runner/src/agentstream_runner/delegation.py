"""Delegation: another assistant answers, as a child run under the same root.

The child has its own run id, `parent_run_id` and `depth + 1`; its events go to the
root's stream, it has no `run.started`/`run.finished` of its own, and its usage is
added to the root's totals. A cycle (A → B → A) or a depth over `MAX_DEPTH` is
refused before it starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agentstream.contracts import StepType, new_id
from agentstream.contracts.steps import DelegateStepInput, DelegateStepOutput
from agentstream_runner.assistants import system_messages
from agentstream_runner.emitter import step
from agentstream_runner.hooks import Delegate
from agentstream_runner.outcome import RunFailure
from agentstream_runner.scope import MAX_DEPTH, Answer, RunScope

AnswerFn = Callable[[RunScope], Awaitable[Answer]]


class DelegationRefused(RunFailure):
    pass


def check_delegation(parent: RunScope, assistant_id: str) -> None:
    if assistant_id in parent.chain:
        path = " → ".join((*parent.chain, assistant_id))
        raise DelegationRefused(f"delegation refused: cycle {path}")
    depth = parent.events.depth + 1
    if depth > MAX_DEPTH:
        raise DelegationRefused(f"delegation refused: depth {depth} is over the limit of {MAX_DEPTH}")


async def delegate_to(parent: RunScope, delegate: Delegate, answer_of: AnswerFn) -> Answer:
    """The child's answer, from `answer_of` (the run body) over the child's scope, in a `delegate` step."""
    check_delegation(parent, delegate.assistant)
    ctx = parent.ctx
    assistant = ctx.assistants.get(delegate.assistant)
    child_id = new_id()
    events = parent.events.child(child_id)
    messages = list(delegate.messages or [])
    step_input = DelegateStepInput(assistant=assistant.id, child_run_id=child_id, messages=len(messages)).as_json()
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
        answer = await answer_of(child)
        record.output = DelegateStepOutput(text=answer.text, data=answer.data).as_json()
        record.memory = parent.memory
    return answer
