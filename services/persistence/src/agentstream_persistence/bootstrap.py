"""Builds persistence: its infra, the run buffers, the flusher and the retention task."""

from __future__ import annotations

from agentstream.config import Settings
from agentstream.redaction import storage_redactor
from agentstream.retention import RetentionTask
from agentstream.service import Infra
from agentstream_persistence.app import PersistenceService
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.flusher import Flusher
from agentstream_persistence.retention import persistence_purges


def bootstrap(settings: Settings) -> PersistenceService:
    infra = Infra.build(settings, PersistenceService.name, uses_database=True)
    assert infra.sessions is not None  # uses_database: the engine is built, lazily connected
    redactor = storage_redactor(settings)  # None: text is stored raw
    return PersistenceService(
        infra,
        buffers=BufferSet(),
        flusher=Flusher(infra.sessions, infra.registry, redactor.redact if redactor else None),
        retention=RetentionTask(persistence_purges, settings, infra.registry, infra.log),
    )
