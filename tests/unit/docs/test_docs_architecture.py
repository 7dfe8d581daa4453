"""docs/architecture.md describes the system the code is: every topic, every service, every named state
of the vocabularies that cross services, and the state machines it promises."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import pytest

from agentstream.config import SERVICES
from agentstream.contracts import FinishReason, RunStatus
from agentstream.contracts.deliveries import LedgerState
from agentstream.db.models_tools import ToolCallState
from agentstream.kafka import TOPIC_NAMES, Topics

ROOT = Path(__file__).resolve().parents[3]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def names(text: str) -> set[str]:
    """Everything the document writes as code (`x`), the way it names topics, services and states."""
    return set(re.findall(r"`([^`\n]+)`", text))


def test_topic_registry_and_names_agree() -> None:
    assert Topics("p.").all() == [f"p.{t}" for t in TOPIC_NAMES]


@pytest.mark.parametrize("topic", TOPIC_NAMES)
def test_every_topic_is_named(topic: str) -> None:
    assert topic in names(ARCHITECTURE)


@pytest.mark.parametrize("service", SERVICES)
def test_every_service_is_named(service: str) -> None:
    assert re.search(rf"\*\*{re.escape(service)}\*\*", ARCHITECTURE), f"no row for **{service}**"


@pytest.mark.parametrize("vocabulary", [RunStatus, FinishReason, LedgerState, ToolCallState])
def test_every_state_of_a_shared_vocabulary_is_named(vocabulary: type[StrEnum]) -> None:
    missing = [member.value for member in vocabulary if member.value not in names(ARCHITECTURE) | _diagram_words()]
    assert not missing, f"{vocabulary.__name__}: {missing}"


def _diagram_words() -> set[str]:
    return set(re.findall(r"[a-z_]+", "\n".join(re.findall(r"```mermaid\n(.*?)```", ARCHITECTURE, re.DOTALL))))


@pytest.mark.parametrize(
    "machine",
    [
        "Ingress: one decision per record",
        "agent-runner: the conversation owner",
        "agent-runner: the run pipeline and its outcome",
        "delivery: one stream per (root run, target)",
        "delivery: the ledger row of one platform message",
        "persistence: one buffer per root run",
    ],
)
def test_every_state_machine_has_a_section(machine: str) -> None:
    assert f"### {machine}" in ARCHITECTURE


def test_there_is_a_diagram() -> None:
    assert "```mermaid" in ARCHITECTURE
