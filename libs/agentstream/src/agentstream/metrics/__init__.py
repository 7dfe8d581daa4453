"""Prometheus plumbing every service shares: its registry (with the process, platform and GC
collectors), the dead-letter reason classes and consumer lag. The catalogue of every metric is
docs/metrics.md, generated from the services' registries (`agentstream_stack.metrics_doc`)."""

from agentstream.metrics.dead_letters import DeadLetterReason, dead_letter_reason
from agentstream.metrics.registry import new_registry

__all__ = ["DeadLetterReason", "dead_letter_reason", "new_registry"]
