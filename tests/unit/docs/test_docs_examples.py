"""The configuration examples in docs/ are valid configurations: copied verbatim, they load.

A YAML block whose top-level keys are all settings sections is loaded as a config file
would be; a compose or Kubernetes fragment (other top-level keys) is not a config. The
local-model quickstart's environment-variable form means the same as its file.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from agentstream.config import Settings, load_settings

DOCS = Path(__file__).resolve().parents[3] / "docs"
BLOCK = re.compile(r"^[ \t]*```(yaml|bash)\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)


def blocks(doc: Path, lang: str) -> list[str]:
    found = []
    for m in BLOCK.finditer(doc.read_text(encoding="utf-8")):
        if m.group(1) == lang:
            body = m.group(2)
            indent = min((len(line) - len(line.lstrip()) for line in body.splitlines() if line.strip()), default=0)
            found.append("\n".join(line[indent:] for line in body.splitlines()))
    return found


def config_examples() -> list[tuple[str, dict[str, object]]]:
    examples = []
    for doc in sorted(DOCS.glob("*.md")):
        for i, text in enumerate(blocks(doc, "yaml")):
            try:
                parsed = yaml.safe_load(text)
            except yaml.YAMLError:
                continue  # several documents, templates: not a config file
            if isinstance(parsed, dict) and parsed and set(parsed) <= set(Settings.model_fields):
                examples.append((f"{doc.name}#{i}", parsed))
    return examples


EXAMPLES = config_examples()


def test_the_guides_have_config_examples() -> None:
    names = {name.split("#")[0] for name, _ in EXAMPLES}
    assert {"models.md", "producing.md", "delivery.md", "ingress.md", "configuration.md"} <= names


@pytest.mark.parametrize(("name", "example"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_every_config_example_loads(name: str, example: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTSTREAM_CONFIG", raising=False)
    load_settings(**example)


def test_the_local_model_quickstart_says_the_same_as_a_file_and_as_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = DOCS / "models.md"
    [from_file] = [e for n, e in EXAMPLES if n.startswith("models.md#")]
    [exports] = [b for b in blocks(doc, "bash") if "AGENTSTREAM__" in b]
    monkeypatch.delenv("AGENTSTREAM_CONFIG", raising=False)
    for line in exports.splitlines():
        name, _, value = shlex.split(line.removeprefix("export "))[0].partition("=")
        monkeypatch.setenv(name, value)
    from_env = load_settings()
    file_settings = load_settings(**from_file)
    assert from_env.default_connector == file_settings.default_connector == "local"
    [env_connector], [file_connector] = from_env.connectors, file_settings.connectors
    for key in ("id", "type", "base_url", "model"):
        assert getattr(env_connector, key) == getattr(file_connector, key), key
