"""Assistants: who answers a run (connector, prompts, sampling, tools, loop, hooks).

The built-in `default` assistant always exists; `assistants_dir` adds one per YAML
file (see `assistant_files.py`). Assistants are immutable after loading.

System prompts take `$CTX.*` variables: `$CTX.assistant` (name),
`$CTX.assistant.id|name|description`, `$CTX.chat` (chat id), `$CTX.chat.id|platform|key`,
`$CTX.user` (name, else id), `$CTX.user.id|name`, `$CTX.team` (team id), `$CTX.locale`
(metadata `locale`) and `$CTX.metadata.<key>`. An unknown variable becomes the empty
string, so a prompt never shows template syntax to the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentstream.config import Settings
from agentstream.contracts import ChatMessage, DoubleTexting, MessageRole, StartRun
from agentstream.tools_catalog import BUILTIN_TOOL_SPECS, is_tool_selector
from agentstream_runner.hooks import Hooks
from agentstream_runner.outcome import RunFailure

DEFAULT_ASSISTANT_ID = "default"
BUILTIN_TOOLS = ("clock", "calculator")


class UnknownAssistant(RunFailure):
    def __init__(self, assistant_id: str) -> None:
        super().__init__(f"assistant {assistant_id!r} not found")


class ToolLoop(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_turns: int = Field(default=5, ge=1, description="LLM calls before the loop gives up.")


class Assistant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    name: str
    description: str = ""
    connector: str | None = Field(default=None, description="Connector id or `use::<role>`; None = defaults.")
    system: list[str] = Field(default_factory=list, description="System prompts; `$CTX.*` variables filled in.")
    options: dict[str, Any] = Field(default_factory=dict, description="Sampling options (temperature, ...).")
    tools: list[str] = Field(default_factory=list, description="Names of the tools the model may call.")
    tool_loop: ToolLoop = Field(default_factory=ToolLoop)
    history_size: int | None = Field(default=None, ge=0)
    double_texting: DoubleTexting = DoubleTexting.ENQUEUE
    hooks: str | None = Field(default=None, description="Module path (or .py file) with `create`/`next`.")
    on_tool_error: Literal["answer", "fail"] = "answer"
    fallback: str | None = Field(default=None, description="Assistant that answers when the tool loop fails.")

    @field_validator("system", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        unknown = [t for t in value if not is_tool_selector(t)]
        if unknown:
            raise ValueError(
                f"unknown tools {unknown}; available: {sorted(BUILTIN_TOOL_SPECS)}, workspace tools, "
                "<server>__<tool> or <server>__*"
            )
        return value

    @property
    def max_turns(self) -> int:
        return self.tool_loop.max_turns


def default_assistant(settings: Settings) -> Assistant:
    return Assistant(
        id=DEFAULT_ASSISTANT_ID,
        name="agentstream demo assistant",
        connector=settings.default_connector,
        system=["You are a helpful assistant. Use the tools when they help."],
        tools=list(BUILTIN_TOOLS),
    )


class Assistants:
    def __init__(
        self, settings: Settings, extra: Iterable[Assistant] = (), hooks: Mapping[str, Hooks] | None = None
    ) -> None:
        self._by_id = {a.id: a for a in (default_assistant(settings), *extra)}
        self._hooks = dict(hooks or {})

    def get(self, assistant_id: str) -> Assistant:
        try:
            return self._by_id[assistant_id]
        except KeyError:
            raise UnknownAssistant(assistant_id) from None

    def hooks(self, assistant_id: str) -> Hooks:
        return self._hooks.get(assistant_id, Hooks())

    def ids(self) -> list[str]:
        return sorted(self._by_id)


# -- system prompts, with `$CTX.*` variables ---------------------------------------
_VARIABLE = re.compile(r"\$CTX\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)")


def prompt_context(assistant: Assistant, start: StartRun, metadata: dict[str, Any]) -> dict[str, str]:
    user, target = start.user, start.reply_target
    values: dict[str, Any] = {
        "assistant": assistant.name,
        "assistant.id": assistant.id,
        "assistant.name": assistant.name,
        "assistant.description": assistant.description,
        "chat": target.chat_id,
        "chat.id": target.chat_id,
        "chat.platform": target.platform,
        "chat.key": start.conversation_key,
        "user": (user.name or user.id) if user else "",
        "user.id": user.id if user else "",
        "user.name": (user.name or "") if user else "",
        "team": (user.team_id or "") if user else "",
        "locale": metadata.get("locale", ""),
    }
    values.update({f"metadata.{k}": v for k, v in metadata.items()})
    return {k: "" if v is None else str(v) for k, v in values.items()}


def render_prompt(template: str, values: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda found: values.get(found.group(1), ""), template)


def system_messages(assistant: Assistant, start: StartRun, metadata: dict[str, Any]) -> list[ChatMessage]:
    values = prompt_context(assistant, start, metadata)
    return [ChatMessage(role=MessageRole.SYSTEM, content=render_prompt(p, values)) for p in assistant.system if p]
