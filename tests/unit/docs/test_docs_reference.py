"""docs/configuration.md and docs/topics.md cover everything the code defines.

A new config key, topic or record type fails here until it is documented.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentstream.config import Settings
from agentstream.kafka import TOPIC_NAMES
from agentstream.kafka.topics import DAY_MS
from agentstream.kafka.topics import TOPICS as TOPIC_REGISTRY

ROOT = Path(__file__).resolve().parents[3]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
TOPICS = (ROOT / "docs" / "topics.md").read_text(encoding="utf-8")


def _model_in(annotation: typing.Any) -> tuple[str, type[BaseModel]] | None:
    """('', M) for M, ('[]', M) for list[M], ('.<name>', M) for dict[str, M]; else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "[]", args[0]
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return ".<name>", args[1]
    return None


def config_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """Documented key spellings: `kafka.partitions`, `connectors[].id`, `platforms.<name>.token_env`."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _model_in(field.annotation)
        if nested is None:
            keys.append(path)
        else:
            suffix, sub = nested
            keys.extend(config_keys(sub, f"{path}{suffix}."))
    return keys


def env_var(key: str) -> str | None:
    """The override variable of a key; None inside lists (those are set as JSON)."""
    if "[]" in key:
        return None
    return "AGENTSTREAM__" + key.replace(".", "__").upper()


def test_config_key_enumeration_sees_nested_shapes() -> None:
    keys = config_keys()
    assert "kafka.bootstrap_servers" in keys
    assert "connectors[].api_key_env" in keys
    assert "platforms.<name>.token_env" in keys
    assert env_var("kafka.bootstrap_servers") == "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS"
    assert env_var("platforms.<name>.token_env") == "AGENTSTREAM__PLATFORMS__<NAME>__TOKEN_ENV"


@pytest.mark.parametrize("key", config_keys())
def test_every_config_key_is_documented(key: str) -> None:
    assert f"`{key}`" in CONFIGURATION, f"docs/configuration.md does not document `{key}`"
    variable = env_var(key)
    if variable is not None:
        assert variable in CONFIGURATION, f"docs/configuration.md does not name {variable}"


def test_configuration_states_precedence_and_secret_rule() -> None:
    assert "AGENTSTREAM_CONFIG" in CONFIGURATION
    assert "Highest precedence first" in CONFIGURATION
    assert "api_key_env" in CONFIGURATION and "token_env" in CONFIGURATION


@pytest.mark.parametrize("topic", TOPIC_NAMES)
def test_every_topic_is_in_the_table(topic: str) -> None:
    assert f"| `{topic}` |" in TOPICS


def _table_rows() -> dict[str, list[str]]:
    """docs/topics.md's topic table: short name → the other cells."""
    rows: dict[str, list[str]] = {}
    table = TOPICS.split("| topic | key | records |", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def _retention(topic: typing.Any) -> str:
    if topic.compacted:
        return "compacted"
    days = topic.retention_ms // DAY_MS
    return f"{days} day{'s' if days != 1 else ''}"


def test_the_topic_table_is_the_registry() -> None:
    """Every cell the registry knows (key, records, partitions, retention, producers, consumers)
    says what `agentstream.kafka.topics.TOPICS` says, and no topic is missing or extra."""
    rows = _table_rows()
    assert list(rows) == list(TOPIC_NAMES)
    for topic in TOPIC_REGISTRY:
        key, records, partitions, retention, producers, consumers = rows[topic.name]
        assert key == topic.key_doc, topic.name
        members = _record_types(topic.record)
        listed = ", ".join(f"`{m.__name__}`" for m in members)
        assert records == listed or records.endswith(f"({len(members)} types, below)"), topic.name
        assert partitions == (str(topic.partitions) if topic.partitions else "`kafka.partitions`"), topic.name
        assert retention == _retention(topic), topic.name
        assert producers == ", ".join(topic.producers), topic.name
        assert consumers == ", ".join(topic.consumers), topic.name


def _record_types(record: typing.Any) -> list[type[BaseModel]]:
    if isinstance(record, type):
        return [record]
    union = typing.get_args(record)[0]  # Annotated[A | B | ..., Field(discriminator=...)]
    return list(typing.get_args(union))


@pytest.mark.parametrize("doc", TOPIC_REGISTRY, ids=lambda d: d.name)
def test_every_record_type_is_described(doc: typing.Any) -> None:
    for model in _record_types(doc.record):
        type_literal = model.model_fields["type"].default
        assert f"`{model.__name__}`" in TOPICS, f"docs/topics.md does not describe {model.__name__}"
        assert f"`{type_literal}`" in TOPICS, f"docs/topics.md does not give the type `{type_literal}`"


def test_topics_doc_links_the_generated_document() -> None:
    assert "(asyncapi.json)" in TOPICS
