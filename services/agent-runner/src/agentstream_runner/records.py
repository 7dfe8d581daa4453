"""Decoding what arrives on the runner's one subscription (`runs` + `tool-results`).

Pure: bytes in, a typed record or an `Undecodable` with a readable reason out.
The record's `type` field picks the contract.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from agentstream.contracts import (
    InterruptRun,
    ResetConversation,
    ResumeRun,
    RunCommand,
    RunCommandAdapter,
    StartRun,
    ToolCallResult,
)
from agentstream.contracts.tools import ToolCallResultAdapter
from agentstream.kafka.decoding import describe_validation_error

RUN_COMMAND_TYPES = tuple(
    str(model.model_fields["type"].default) for model in (StartRun, InterruptRun, ResumeRun, ResetConversation)
)
TOOL_RESULT_TYPE = str(ToolCallResult.model_fields["type"].default)


@dataclass(frozen=True)
class Undecodable:
    reason: str


RunnerRecord = RunCommand | ToolCallResult


def decode_record(raw: bytes) -> RunnerRecord | Undecodable:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        return Undecodable(f"not valid JSON: {err}")
    except RecursionError:  # json.loads recurses per nesting level: "[" * 5000 ends here
        return Undecodable("not valid JSON: nested too deeply")
    if not isinstance(data, dict):
        return Undecodable(f"expected a JSON object, got {type(data).__name__}")
    record_type = data.get("type")
    try:
        if record_type == TOOL_RESULT_TYPE:
            return ToolCallResultAdapter.validate_python(data)
        if record_type in RUN_COMMAND_TYPES:
            return RunCommandAdapter.validate_python(data)
    except ValidationError as err:
        return Undecodable(f"invalid {record_type}: {describe_validation_error(err)}")
    expected = ", ".join((*RUN_COMMAND_TYPES, TOOL_RESULT_TYPE))
    return Undecodable(f"unknown record type {record_type!r}; expected one of: {expected}")
