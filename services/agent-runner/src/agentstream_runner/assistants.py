"""Assistants: who answers a run (connector, prompt, tools, turn budget).

Only the built-in `default` assistant exists today. Loading `assistants_dir`
(one YAML per assistant) is a later issue: it adds its assistants through the
`extra` argument of `Assistants`, nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from agentstream.config import Settings
from agentstream_runner.errors import UnknownAssistant

DEFAULT_ASSISTANT_ID = "default"
BUILTIN_TOOLS = ("clock", "calculator")


class Assistant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    connector: str | None = Field(default=None, description="Connector id; None = resolution defaults.")
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list, description="Names of the tools the model may call.")
    max_turns: int = Field(default=5, ge=1, description="LLM calls per run before the tool loop gives up.")


def default_assistant(settings: Settings) -> Assistant:
    connector = settings.default_connector or (settings.connectors[0].id if settings.connectors else None)
    return Assistant(
        id=DEFAULT_ASSISTANT_ID,
        name="agentstream demo assistant",
        connector=connector,
        system_prompt="You are a helpful assistant. Use the tools when they help.",
        tools=list(BUILTIN_TOOLS),
    )


class Assistants:
    def __init__(self, settings: Settings, extra: Iterable[Assistant] = ()) -> None:
        self._by_id = {a.id: a for a in (default_assistant(settings), *extra)}

    def get(self, assistant_id: str) -> Assistant:
        try:
            return self._by_id[assistant_id]
        except KeyError:
            raise UnknownAssistant(assistant_id) from None

    def ids(self) -> list[str]:
        return sorted(self._by_id)
