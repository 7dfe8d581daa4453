"""The script of the `scripted` connector: rules from a message pattern to a reply.

Pure: `plan_reply` decides what the model "says" for a request; the connector
only paces it out. The built-in demo script lives next to this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentstream.contracts import ChatMessage, MessageRole

DEMO_SCRIPT = "demo_script.yaml"


class _Placeholders(dict[str, str]):
    """Unknown placeholders stay visible instead of raising KeyError."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, values: dict[str, str]) -> str:
    return template.format_map(_Placeholders(values))


class ScriptRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str = Field(default="", description="Regex searched in the latest user message; empty matches anything.")
    tool: str | None = Field(default=None, description="Tool to call on the first turn.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Tool arguments; string values are templates.")
    say: str = Field(default="", description="Text streamed together with the tool call.")
    reply: str = Field(default="", description="The answer (after the tool result when `tool` is set).")

    @model_validator(mode="after")
    def _check(self) -> ScriptRule:
        try:
            re.compile(self.match)
        except re.error as err:
            raise ValueError(f"match is not a valid regex: {err}") from None
        if not self.tool and not self.reply:
            raise ValueError("a rule needs a tool or a reply")
        for template in (self.say, self.reply, *(v for v in self.arguments.values() if isinstance(v, str))):
            try:
                render(template, {})
            except (ValueError, IndexError) as err:
                raise ValueError(f"bad template {template!r}: {err}") from None
        return self

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.match)  # re caches compiled patterns


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[ScriptRule]


def load_script(path: str | Path | None = None) -> Script:
    """The script at `path`, else the built-in demo script. Raises ValueError on a bad file."""
    if path is None:
        source = resources.files(__package__).joinpath(DEMO_SCRIPT).read_text(encoding="utf-8")
        origin = f"built-in {DEMO_SCRIPT}"
    else:
        source = Path(path).read_text(encoding="utf-8")
        origin = str(path)
    try:
        return Script.model_validate(yaml.safe_load(source))
    except (yaml.YAMLError, ValidationError) as err:
        raise ValueError(f"invalid connector script {origin}: {err}") from None


@dataclass(frozen=True)
class PlannedReply:
    """What the scripted model answers to one request."""

    text: str
    tool: str | None = None
    arguments: str = "{}"


def plan_reply(script: Script, messages: list[ChatMessage], tools: frozenset[str]) -> PlannedReply:
    """The first rule that matches the latest user message decides.

    A tool rule answers with the tool call while no tool result follows the user
    message, then with its reply template filled with the latest result. A rule
    whose tool is not offered and has no result yet is skipped.
    """
    user_at = max((i for i, m in enumerate(messages) if m.role == MessageRole.USER), default=None)
    if user_at is None:
        return PlannedReply(text="")
    text = messages[user_at].content
    results = [m.content for m in messages[user_at + 1 :] if m.role == MessageRole.TOOL]
    for rule in script.rules:
        found = rule.pattern.search(text)
        # A tool rule whose tool is not offered is skipped, like a real model would,
        # unless its result is already there (then it only answers from it).
        if found is None or (rule.tool and rule.tool not in tools and not results):
            continue
        values = {"text": text, **{k: v or "" for k, v in found.groupdict().items()}}
        if rule.tool and not results:
            args = {k: render(v, values) if isinstance(v, str) else v for k, v in rule.arguments.items()}
            return PlannedReply(text=render(rule.say, values), tool=rule.tool, arguments=json.dumps(args))
        values["result"] = results[-1] if results else ""
        return PlannedReply(text=render(rule.reply or "{result}", values))
    return PlannedReply(text="")
