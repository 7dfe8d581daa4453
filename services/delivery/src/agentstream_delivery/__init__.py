"""delivery: consumes `events`, streams answers into chat platforms by editing messages in place."""

from agentstream_delivery.app import DeliveryService

__all__ = ["DeliveryService"]
