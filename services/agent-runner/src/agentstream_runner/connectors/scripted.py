"""The `scripted` connector: a deterministic, offline model for demos and tests.

It streams the reply that `plan_reply` chose, one whitespace token at a time with
`token_delay_ms` between tokens, so streaming, coalescing and interrupts behave as
with a real model. Usage counts whitespace tokens.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, MessageRole, Usage
from agentstream_runner.connectors.base import Chunk, Configured, LLMRequest, TextDelta, ToolCallChunk, UsageChunk
from agentstream_runner.connectors.script import Script, load_script, plan_reply

# A token is a word with the whitespace before it, so the tokens join back to the text.
_TOKEN = re.compile(r"\s*\S+|\s+$")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def count_prompt_tokens(messages: list[ChatMessage]) -> int:
    return sum(len(m.content.split()) for m in messages)


def _next_call_id(messages: list[ChatMessage]) -> str:
    made = sum(len(m.tool_calls) for m in messages if m.role == MessageRole.ASSISTANT)
    return f"call_{made + 1}"


class ScriptedConnector(Configured):
    def __init__(
        self,
        settings: ConnectorSettings,
        script: Script | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(settings)
        self._script = script or load_script(settings.script)
        self._delay_s = settings.token_delay_ms / 1000
        self._sleep = sleep

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        messages = list(request.messages)
        reply = plan_reply(self._script, messages, request.tool_names)
        tokens = tokenize(reply.text)
        for i, token in enumerate(tokens):
            if i and self._delay_s:
                await self._sleep(self._delay_s)
            yield TextDelta(token)
        if reply.tool:
            yield ToolCallChunk(call_id=_next_call_id(messages), name=reply.tool, arguments=reply.arguments)
        yield UsageChunk(Usage(prompt_tokens=count_prompt_tokens(messages), completion_tokens=len(tokens), llm_calls=1))
