"""Field limits of the run-scoped records, the widths of the database columns they land in.

A record that breaks one is refused when it is decoded (to `dlq`, with the field named),
instead of failing in persistence's flush, where it would hold its partition's offset.
Tool-call arguments are raw JSON text: their nesting is bounded so that nothing that parses
them (history summaries, tools) recurses deeply.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

MAX_RUN_ID = 64  # runs.run_id, root_run_id, parent_run_id; session ids; event ids (audit_log.event_id)
MAX_CONVERSATION_KEY = 512  # conversations.key, runs.conversation_key, …
MAX_NAME = 128  # assistant, connector, tool, step, call and message ids
MAX_REASON = 64  # runs.reason, run_checkpoints.reason
MAX_SUBJECT = 256  # user and tenant ids; inbound ids
MAX_PLATFORM = 64  # conversations.platform
MAX_CHAT = 256  # conversations.chat_id, thread_id
MAX_JSON_DEPTH = 64

RunId = Annotated[str, StringConstraints(max_length=MAX_RUN_ID)]
SessionId = Annotated[str, StringConstraints(max_length=MAX_RUN_ID)]
ConversationKey = Annotated[str, StringConstraints(max_length=MAX_CONVERSATION_KEY)]
Name = Annotated[str, StringConstraints(max_length=MAX_NAME)]
Reason = Annotated[str, StringConstraints(max_length=MAX_REASON)]
Subject = Annotated[str, StringConstraints(max_length=MAX_SUBJECT)]
Platform = Annotated[str, StringConstraints(max_length=MAX_PLATFORM)]
Chat = Annotated[str, StringConstraints(max_length=MAX_CHAT)]


def json_depth(text: str) -> int:
    """Deepest nesting of `[`/`{` in JSON text, counted without parsing (no recursion; text
    that is not JSON is measured the same way, brackets inside strings ignored)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def _bounded_nesting(text: str) -> str:
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:  # the usual case, without a scan
        return text
    if (depth := json_depth(text)) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested {depth} levels deep; at most {MAX_JSON_DEPTH}")
    return text


JsonText = Annotated[str, AfterValidator(_bounded_nesting)]
