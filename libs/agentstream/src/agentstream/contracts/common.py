"""Value objects shared by several topics."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from agentstream.contracts.base import Value
from agentstream.contracts.keys import conversation_key
from agentstream.contracts.limits import Chat, JsonText, Name, Platform, Subject


class MessageRole(StrEnum):
    """Who speaks in a model conversation (OpenAI-style roles)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ReplyTarget(Value):
    """Where the answer of a run is delivered."""

    platform: Platform
    chat_id: Chat
    thread_id: Chat | None = None
    reply_to_id: Subject | None = Field(default=None, description="Platform message id to reply to.")
    tenant_id: Subject | None = Field(
        default=None, description="The conversation's tenant (none: `default`); chat ids are only unique in one."
    )

    @property
    def conversation_key(self) -> str:
        return conversation_key(self.platform, self.chat_id, self.thread_id, tenant_id=self.tenant_id)


class ToolCallSpec(Value):
    """A tool call as the model made it (inside an assistant message)."""

    id: Name
    name: Name
    arguments: JsonText = Field(default="{}", description="Raw JSON arguments (nested at most 64 deep).")


class ChatMessage(Value):
    """One message of a model conversation (OpenAI-style roles)."""

    role: MessageRole
    content: str = ""
    name: Name | None = None
    tool_call_id: Name | None = Field(default=None, description="role=tool: the call this answers.")
    tool_calls: list[ToolCallSpec] = Field(default_factory=list, description="role=assistant: calls made.")


class Usage(Value):
    """Token usage, summed over every LLM call of a run."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            llm_calls=self.llm_calls + other.llm_calls,
        )
