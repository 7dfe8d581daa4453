"""A call's arguments: near-JSON repaired where unambiguous, then checked against the schema.

Models sometimes write almost-JSON: a trailing comma, single-quoted strings, Python's
`True`/`None`, a Markdown code fence around the object. Each has one obvious reading, so it
is repaired, and the result says so (`repairs`) so the model can do better next time.
Anything else that does not parse stays an error. A schema violation names the field it is
about, as a retryable `ArgumentError`: the model can fix the call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import ValidationError
from jsonschema.exceptions import best_match

from agentstream_tools.registry import Tool
from agentstream_tools.validation import ArgumentError, shown

FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}

REMOVED_FENCE = "removed a Markdown code fence"
TRAILING_COMMA = "removed a trailing comma"
SINGLE_QUOTES = "replaced single quotes with double quotes"
PYTHON_LITERAL = "replaced Python True/False/None with JSON true/false/null"


@dataclass(frozen=True)
class Arguments:
    values: dict[str, Any]
    repairs: tuple[str, ...] = ()  # what was repaired, in words for the model

    def note(self) -> str:
        """The line appended to the result when something was repaired."""
        return f"[note: the arguments were not valid JSON and were repaired: {'; '.join(self.repairs)}]"


def _single_quoted(text: str, start: int, out: list[str]) -> int:
    """Copy the single-quoted string at `start` as a JSON string; the index after it."""
    out.append('"')
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("'" if nxt == "'" else ch + nxt)
            i += 2
            continue
        if ch == "'":
            out.append('"')
            return i + 1
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return i  # unterminated: left for json.loads to refuse


def _double_quoted(text: str, start: int, out: list[str]) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            break
        i += 1
    out.append(text[start : i + 1])
    return i + 1


def repair(text: str) -> tuple[str, list[str]]:
    """`text` with the unambiguous near-JSON mistakes fixed, and what was fixed."""
    repairs: list[str] = []
    if fenced := FENCE.match(text):
        text = fenced.group(1)
        repairs.append(REMOVED_FENCE)
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _double_quoted(text, i, out)
        elif ch == "'":
            i = _single_quoted(text, i, out)
            if SINGLE_QUOTES not in repairs:
                repairs.append(SINGLE_QUOTES)
        elif ch == "," and (close := re.match(r"\s*[}\]]", text[i + 1 :])) is not None:
            i += 1 + len(close.group(0)) - 1  # drop the comma, keep what follows
            if TRAILING_COMMA not in repairs:
                repairs.append(TRAILING_COMMA)
        elif ch.isalpha():
            word = re.match(r"[A-Za-z_]\w*", text[i:])
            assert word is not None
            literal = word.group(0)
            out.append(PYTHON_LITERALS.get(literal, literal))
            if literal in PYTHON_LITERALS and PYTHON_LITERAL not in repairs:
                repairs.append(PYTHON_LITERAL)
            i += len(literal)
        else:
            out.append(ch)
            i += 1
    return "".join(out), repairs


def _load(tool: Tool, raw: str) -> tuple[Any, tuple[str, ...]]:
    if not raw.strip():
        return {}, ()
    try:
        return json.loads(raw), ()
    except json.JSONDecodeError as err:
        original = err
    fixed, repairs = repair(raw)
    if repairs:
        try:
            return json.loads(fixed), tuple(repairs)
        except json.JSONDecodeError:
            pass  # not one of the known mistakes, or more than them: the original error says where
    raise ArgumentError(
        f"arguments of {tool.name} are not valid JSON: {original.msg} at position {original.pos}"
    ) from None


def _field(error: ValidationError) -> str:
    """The field an error is about: its path, or for `required`/`additionalProperties` the named key."""
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        path.append(missing[0] if missing else "?")
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        path.append(extra[0] if extra else "?")
    return ".".join(path)


def describe_schema_error(tool: Tool, error: ValidationError) -> str:
    field = _field(error)
    if error.validator == "required":
        problem = "is required"
    elif error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        problem = f"is not a parameter of {tool.name} (parameters: {allowed})"
    else:
        problem = (
            error.message if len(error.message) <= 120 else f"{shown(error.instance)} is invalid ({error.validator})"
        )
    where = f"field '{field}' " if field else ""
    return f"invalid arguments for {tool.name}: {where}{problem}"


def parse_arguments(tool: Tool, raw: str) -> Arguments:
    """The call's arguments as a dict that satisfies the tool's schema, and what was repaired."""
    values, repairs = _load(tool, raw)
    if not isinstance(values, dict):
        raise ArgumentError(f"arguments of {tool.name} must be a JSON object, got {type(values).__name__}")
    if not values and tool.accepts_no_arguments:  # a call without arguments: the schema's answer is known
        return Arguments(values, repairs)
    validator = tool.validator
    if validator.is_valid(values):  # the common case, without collecting errors (less than half the cost)
        return Arguments(values, repairs)
    error = best_match(validator.iter_errors(values))
    if error is not None:
        raise ArgumentError(describe_schema_error(tool, error))
    return Arguments(values, repairs)
