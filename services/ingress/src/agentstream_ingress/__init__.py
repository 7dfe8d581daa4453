"""ingress: consumes `inbound`, produces `runs`, `events` and `dlq`."""

from agentstream_ingress.app import IngressService

__all__ = ["IngressService"]
