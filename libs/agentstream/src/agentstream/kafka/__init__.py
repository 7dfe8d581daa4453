from agentstream.kafka.broker import consumer_options, make_broker
from agentstream.kafka.embedded import EmbeddedBroker, free_port
from agentstream.kafka.security import broker_security, client_security
from agentstream.kafka.topics import TOPIC_NAMES, TOPICS, Topic, Topics, create_topics

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
