"""Kafka: topics, the broker clients' settings, the embedded broker.

The names below are loaded on first use (PEP 562): `agentstream send` and the other CLI commands
that only produce and read need `Topics`, not FastStream or the embedded broker, and importing
those cost most of a second of every command's start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstream.kafka.broker import consumer_options, make_broker
    from agentstream.kafka.embedded import EmbeddedBroker, free_port
    from agentstream.kafka.security import broker_security, client_security
    from agentstream.kafka.topics import TOPIC_NAMES, TOPICS, Topic, Topics, create_topics

_MODULE_OF = {
    "consumer_options": "agentstream.kafka.broker",
    "make_broker": "agentstream.kafka.broker",
    "EmbeddedBroker": "agentstream.kafka.embedded",
    "free_port": "agentstream.kafka.embedded",
    "broker_security": "agentstream.kafka.security",
    "client_security": "agentstream.kafka.security",
    "TOPIC_NAMES": "agentstream.kafka.topics",
    "TOPICS": "agentstream.kafka.topics",
    "Topic": "agentstream.kafka.topics",
    "Topics": "agentstream.kafka.topics",
    "create_topics": "agentstream.kafka.topics",
}

__all__ = [
    "TOPICS",
    "TOPIC_NAMES",
    "EmbeddedBroker",
    "Topic",
    "Topics",
    "broker_security",
    "client_security",
    "consumer_options",
    "create_topics",
    "free_port",
    "make_broker",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'agentstream.kafka' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
