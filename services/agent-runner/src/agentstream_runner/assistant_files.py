"""Loading `assistants_dir`: one YAML file per assistant.

Each file is validated on its own: a bad file is reported with its path and the
offending field, and every other file still loads. Hooks modules are imported at
load time, so a broken hook is a load problem rather than a failed run later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from agentstream_runner.assistants import DEFAULT_ASSISTANT_ID, Assistant
from agentstream_runner.hooks import Hooks, load_hooks

PATTERNS = ("*.yaml", "*.yml")


@dataclass(frozen=True)
class LoadProblem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


@dataclass(frozen=True)
class LoadedAssistants:
    assistants: list[Assistant]
    hooks: dict[str, Hooks]
    problems: list[LoadProblem]


def _load_file(path: Path) -> tuple[Assistant, Hooks] | list[LoadProblem]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        return [LoadProblem(str(path), "(file)", f"unreadable YAML: {err}")]
    if not isinstance(raw, dict):
        return [LoadProblem(str(path), "(root)", "expected a mapping of assistant fields")]
    try:
        assistant = Assistant.model_validate(raw)
    except ValidationError as err:
        return [LoadProblem(str(path), ".".join(str(p) for p in e["loc"]) or "(root)", e["msg"]) for e in err.errors()]
    try:
        hooks = load_hooks(assistant.hooks, base_dir=path.parent)
    except Exception as err:  # any import-time error of user code is a load problem
        return [LoadProblem(str(path), "hooks", f"cannot load {assistant.hooks!r}: {type(err).__name__}: {err}")]
    return assistant, hooks


def load_assistants_dir(directory: str | Path) -> LoadedAssistants:
    root = Path(directory)
    if not root.is_dir():
        return LoadedAssistants([], {}, [LoadProblem(str(root), "assistants_dir", "not a directory")])
    assistants: list[Assistant] = []
    hooks: dict[str, Hooks] = {}
    problems: list[LoadProblem] = []
    seen: dict[str, Path] = {}
    for path in sorted(p for pattern in PATTERNS for p in root.glob(pattern)):
        loaded = _load_file(path)
        if isinstance(loaded, list):
            problems.extend(loaded)
            continue
        assistant, assistant_hooks = loaded
        if assistant.id in seen:
            problems.append(
                LoadProblem(str(path), "id", f"duplicate id {assistant.id!r} (also in {seen[assistant.id]})")
            )
            continue
        seen[assistant.id] = path
        assistants.append(assistant)
        hooks[assistant.id] = assistant_hooks
    known = set(seen) | {DEFAULT_ASSISTANT_ID}
    for assistant in assistants:
        if assistant.fallback and assistant.fallback not in known:
            problems.append(
                LoadProblem(str(seen[assistant.id]), "fallback", f"unknown assistant {assistant.fallback!r}")
            )
    return LoadedAssistants(assistants, hooks, problems)
