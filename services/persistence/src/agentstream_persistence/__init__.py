"""persistence: buffers run events per root run and writes each run once, at its end."""

from agentstream_persistence.app import PersistenceService

__all__ = ["PersistenceService"]
