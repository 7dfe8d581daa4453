"""Python function tools: functions named by dotted path in `tools.functions`, served as
`<group>__<function name>`.

The arguments' JSON schema comes from the function's type hints (through a pydantic model)
and the parameter descriptions from its docstring (Google `Args:` or Sphinx `:param x:`); the
tool's description is the docstring's text before those. Arguments are validated by that
model, so a hint such as `datetime` or a pydantic model arrives converted. A sync function runs
in a worker thread (a timeout ends the call for the model, not the thread); an async one on
the event loop. A path that does not import, or a function that cannot be described, is
reported with its path and skipped: the others still load. See docs/tools.md.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json

from agentstream.observability import get_logger
from agentstream.tools_catalog import ToolSpec, source_tool_name
from agentstream_tools.registry import Tool
from agentstream_tools.validation import ArgumentError

LOGGER = "agentstream.tool-executor.functions"

SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
GOOGLE_PARAM = re.compile(r"^\s+(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


@dataclass(frozen=True)
class LoadProblem:
    path: str
    error: str


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, parameter → description) from a Google- or Sphinx-style docstring."""
    lines = (inspect.getdoc(fn) or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        if (head := SECTION.match(line)) is not None:
            section, current = head.group(1), None
            continue
        if (sphinx := SPHINX_PARAM.match(line)) is not None:
            section, current = "Args", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif line.lstrip().startswith(":"):
            section, current = "fields", None  # :returns:, :raises: ...
        elif section in ("Args", "Arguments", "Parameters"):
            if (google := GOOGLE_PARAM.match(line)) is not None:
                current = google.group(1).lstrip("*")
                params[current] = google.group(3).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section is None:
            summary.append(line)
    return " ".join(" ".join(summary).split()), params


def _arguments_model(fn: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"parameter {name!r}: only named parameters can be tool arguments")
        default = ... if param.default is param.empty else param.default
        fields[name] = (hints.get(name, Any), Field(default=default, description=docs.get(name)))
    return create_model(  # type: ignore[call-overload,no-any-return]
        f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return to_json(value, fallback=str).decode()


def function_tool(group: str, fn: Callable[..., Any]) -> Tool:
    """`fn` as the tool `<group>__<fn name>`; raises (TypeError, ValueError) when it cannot be described."""
    description, docs = _docstring(fn)
    model = _arguments_model(fn, docs)
    schema = model.model_json_schema()
    schema.pop("title", None)
    spec = ToolSpec(name=source_tool_name(group, fn.__name__), description=description, parameters=schema)
    is_async = inspect.iscoroutinefunction(fn)

    async def run(args: dict[str, Any]) -> str:
        try:
            validated = model.model_validate(args)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise ArgumentError(f"invalid arguments for {spec.name}: field '{field}' {first['msg']}") from None
        kwargs = {name: getattr(validated, name) for name in model.model_fields}
        result = await fn(**kwargs) if is_async else await asyncio.to_thread(fn, **kwargs)
        return _as_text(result)

    return Tool.from_spec(spec, run)


def import_function(path: str) -> Callable[..., Any]:
    """`package.module:function` or `package.module.function`."""
    module_name, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    target = getattr(importlib.import_module(module_name), attr)
    if not callable(target):
        raise TypeError(f"{path} is not a function")
    return target  # type: ignore[no-any-return]


def load_function_tools(groups: dict[str, list[str]]) -> tuple[list[Tool], list[LoadProblem]]:
    """Every function tool that loads, and what went wrong with the others (each logged with its path)."""
    tools: list[Tool] = []
    problems: list[LoadProblem] = []
    for group, paths in groups.items():
        for path in paths:
            try:
                tool = function_tool(group, import_function(path))
                if any(t.name == tool.name for t in tools):
                    raise ValueError(f"a second function named {tool.name}")
                tools.append(tool)
            except Exception as err:  # an import error, a syntax error in the module, a bad signature
                problems.append(LoadProblem(path, f"{type(err).__name__}: {err}"))
                # A logger of the moment, not a module-level one: loading runs once, at start.
                get_logger(LOGGER).error(
                    "function tool not loaded", group=group, path=path, error=f"{type(err).__name__}: {err}"
                )
    return tools, problems
