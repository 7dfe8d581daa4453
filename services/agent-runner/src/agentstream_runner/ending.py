"""Exactly one ending per run, after the first model call:

- the assistant has a `next` hook → the hook decides: nothing (the standard
  response), `data` (standard response + data) or `delegate` (a child answers);
- else, with `tool_loop.enabled`, the tool loop: results go back to the model
  until it answers without tools; after `max_turns` model calls the fallback
  assistant answers from the conversation, and if that fails too, the standard
  response;
- else the standard response.

The standard response: the model's text when it called no tools, else one more
model call, offered no tools, that answers from the tool results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_never

import structlog

from agentstream_runner.hooks import Delegate, NextInput, call_next
from agentstream_runner.llm_step import Completion, llm_turn
from agentstream_runner.outcome import RunFailure
from agentstream_runner.scope import Answer, RunScope
from agentstream_runner.tool_calls import AnsweredOnRetry, PhaseEnd, ToolsDone, ToolsFailed, run_tool_calls

DelegateFn = Callable[[RunScope, Delegate], Awaitable[Answer]]
log = structlog.get_logger(__name__)


async def standard_response(scope: RunScope, completion: Completion, phase: PhaseEnd | None) -> Answer:
    match phase:
        case None:
            return Answer(completion.text)
        case AnsweredOnRetry(completion=answered):
            return Answer(answered.text)
        case ToolsFailed() if scope.assistant.on_tool_error == "fail":
            raise RunFailure(f"tool calls failed: {phase.error}")
        case ToolsDone() | ToolsFailed():
            # Tool results (or non-retryable errors) are in memory: the model answers from them.
            return Answer((await llm_turn(scope, with_tools=False)).text)
        case _:
            assert_never(phase)


async def _tools_of(scope: RunScope, completion: Completion) -> PhaseEnd | None:
    return await run_tool_calls(scope, completion) if completion.tool_calls else None


async def next_hook_ending(scope: RunScope, completion: Completion, delegate: DelegateFn) -> Answer:
    assert scope.hooks.next is not None
    phase: PhaseEnd | None = None
    error: str | None = None
    try:
        phase = await _tools_of(scope, completion)
    except RunFailure as err:  # the hook may still rescue the run by delegating
        error = str(err)
    results = phase.results if isinstance(phase, ToolsDone | ToolsFailed) else []
    if isinstance(phase, ToolsFailed):
        error = phase.error
    last = phase.completion if isinstance(phase, ToolsDone | AnsweredOnRetry) else completion
    decision = await call_next(
        scope.hooks.next,
        NextInput(
            messages=list(scope.memory),
            text=last.text,
            tool_calls=list(last.tool_calls),
            tool_results=results,
            error=error,
        ),
    )
    if decision.delegate is not None:
        return await delegate(scope, decision.delegate)
    if error is not None and not isinstance(phase, ToolsFailed):
        raise RunFailure(error)
    answer = await standard_response(scope, completion, phase)
    return Answer(answer.text, decision.data or {})


async def tool_loop_ending(scope: RunScope, completion: Completion, delegate: DelegateFn) -> Answer:
    loop = scope.assistant.tool_loop
    turns = 1
    while True:
        phase = await _tools_of(scope, completion)
        if not isinstance(phase, ToolsDone):
            return await standard_response(scope, completion, phase)
        if not loop.enabled:
            return await standard_response(scope, completion, phase)
        if turns >= loop.max_turns:
            return await _loop_failed(scope, completion, phase, delegate)
        completion = await llm_turn(scope)
        turns += 1


async def _loop_failed(scope: RunScope, completion: Completion, phase: PhaseEnd, delegate: DelegateFn) -> Answer:
    fallback = scope.assistant.fallback
    log.info(
        "tool loop reached max_turns",
        run_id=scope.run_id,
        max_turns=scope.assistant.tool_loop.max_turns,
        fallback=fallback,
    )
    if fallback:
        try:
            return await delegate(scope, Delegate(assistant=fallback, messages=scope.conversation()))
        except RunFailure as err:
            log.warning("fallback assistant failed", run_id=scope.run_id, fallback=fallback, error=str(err))
    return await standard_response(scope, completion, phase)


async def finish(scope: RunScope, completion: Completion, delegate: DelegateFn) -> Answer:
    if scope.hooks.next is not None:
        return await next_hook_ending(scope, completion, delegate)
    return await tool_loop_ending(scope, completion, delegate)
