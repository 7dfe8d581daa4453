"""delivery: consumes `events`, streams answers into chat platforms by editing messages in place."""

from agentstream_delivery.app import DeliveryService
from agentstream_delivery.bootstrap import bootstrap

__all__ = ["DeliveryService", "bootstrap"]
