"""docs/asyncapi.json is generated from the contract models and must not drift."""

from __future__ import annotations

import json
from pathlib import Path

from agentstream.asyncapi import build_document, main, render
from agentstream.contracts import RunCommandAdapter, RunEventAdapter
from agentstream.kafka import TOPIC_NAMES, TOPICS

ROOT = Path(__file__).resolve().parents[3]
CHECKED_IN = ROOT / "docs" / "asyncapi.json"


def test_checked_in_document_is_up_to_date() -> None:
    assert CHECKED_IN.is_file(), "docs/asyncapi.json is missing: run `make docs`"
    assert CHECKED_IN.read_text(encoding="utf-8") == render(), (
        "docs/asyncapi.json differs from the contract models: run `make docs` and commit the result"
    )


def test_every_topic_is_a_receive_and_a_send_channel_with_the_default_prefix() -> None:
    doc = build_document()
    assert doc["info"]["title"] == "agentstream"
    assert doc["asyncapi"].startswith("3.")
    addresses = {name: ch["address"] for name, ch in doc["channels"].items()}
    for topic in TOPIC_NAMES:
        assert addresses[f"{topic}:receive"] == f"agentstream.{topic}"
        assert addresses[f"{topic}:send"] == f"agentstream.{topic}"
    actions = {name: op["action"] for name, op in doc["operations"].items()}
    assert actions == {
        f"{t}:{side}": ("receive" if side == "receive" else "send") for t in TOPIC_NAMES for side in ("receive", "send")
    }


def _union_members(schema: dict) -> set[str]:
    """Model names of a oneOf union, whatever the $ref base (#/$defs or #/components/schemas)."""
    return {ref["$ref"].rsplit("/", 1)[-1] for ref in schema["oneOf"]}


def test_union_topics_list_every_record_type_of_their_adapter() -> None:
    doc = build_document()
    schemas = doc["components"]["schemas"]
    messages = doc["components"]["messages"]
    for topic, adapter in (("events", RunEventAdapter), ("runs", RunCommandAdapter)):
        expected = _union_members(adapter.json_schema())
        for side in ("receive:SubscribeMessage", "send:Message"):
            payload_ref = messages[f"{topic}:{side}"]["payload"]["$ref"].rsplit("/", 1)[-1]
            assert _union_members(schemas[payload_ref]) == expected


def test_field_descriptions_reach_the_document() -> None:
    inbound = build_document()["components"]["schemas"]["InboundMessage"]
    assert inbound["properties"]["chat_id"]["description"] == "Chat / channel id on the platform."
    assert {"id", "platform", "chat_id", "user", "text"} <= set(inbound["required"])


def test_topic_table_descriptions_name_key_producers_and_consumers() -> None:
    doc = build_document()
    for topic in TOPICS:
        description = doc["channels"][f"{topic.name}:receive"]["description"]
        assert "Key:" in description and "Produced by:" in description and "Consumed by:" in description


def test_cli_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "asyncapi.json"
    assert main([str(out)]) == 0
    assert json.loads(out.read_text()) == build_document()


def test_prefix_option_renames_every_address(tmp_path: Path) -> None:
    out = tmp_path / "asyncapi.json"
    main([str(out), "--prefix", "prod."])
    addresses = {ch["address"] for ch in json.loads(out.read_text())["channels"].values()}
    assert addresses == {f"prod.{t}" for t in TOPIC_NAMES}
