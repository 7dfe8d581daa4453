"""Platform adapters: one module per platform, all behind `PlatformAdapter`."""

from agentstream_delivery.adapters.base import AdapterError, PlatformAdapter
from agentstream_delivery.adapters.console import ConsoleAdapter
from agentstream_delivery.adapters.memory import MemoryAdapter, MemoryMessage

__all__ = ["AdapterError", "ConsoleAdapter", "MemoryAdapter", "MemoryMessage", "PlatformAdapter"]
