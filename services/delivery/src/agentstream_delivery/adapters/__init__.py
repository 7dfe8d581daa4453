"""Platform adapters: one module per platform, all behind `PlatformAdapter`."""

from agentstream_delivery.adapters.base import AdapterError, Capabilities, PlatformAdapter
from agentstream_delivery.adapters.console import ConsoleAdapter
from agentstream_delivery.adapters.discord import DiscordAdapter
from agentstream_delivery.adapters.memory import MemoryAdapter, MemoryMessage
from agentstream_delivery.adapters.signal import SignalAdapter
from agentstream_delivery.adapters.slack import SlackAdapter
from agentstream_delivery.adapters.telegram import TelegramAdapter
from agentstream_delivery.adapters.webhook import WebhookAdapter

__all__ = [
    "AdapterError",
    "Capabilities",
    "ConsoleAdapter",
    "DiscordAdapter",
    "MemoryAdapter",
    "MemoryMessage",
    "PlatformAdapter",
    "SignalAdapter",
    "SlackAdapter",
    "TelegramAdapter",
    "WebhookAdapter",
]
