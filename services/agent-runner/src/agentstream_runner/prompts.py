"""System prompts with `$CTX.*` variables.

Variables: `$CTX.assistant` (name), `$CTX.assistant.id|name|description`,
`$CTX.chat` (chat id), `$CTX.chat.id|platform|key`, `$CTX.user` (name, else id),
`$CTX.user.id|name`, `$CTX.team` (team id), `$CTX.locale` (metadata `locale`) and
`$CTX.metadata.<key>`. An unknown variable becomes the empty string, so a prompt
never shows template syntax to the model.
"""

from __future__ import annotations

import re
from typing import Any

from agentstream.contracts import ChatMessage, MessageRole, StartRun
from agentstream_runner.assistants import Assistant

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
