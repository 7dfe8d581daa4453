"""Builds persistence: its infra and runtime, the run buffers, the flusher and the retention task."""

from __future__ import annotations

from agentstream.config import Settings
from agentstream.parts.readiness import database_ready
from agentstream.redaction import storage_redactor
from agentstream.retention import RetentionTask
from agentstream.service import Infra, Runtime
from agentstream_persistence.app import PersistenceService
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.flusher import Flusher
from agentstream_persistence.retention import persistence_purges


def bootstrap(settings: Settings) -> PersistenceService:
    infra = Infra.build(settings, PersistenceService.name, uses_database=True)
    assert infra.engine is not None and infra.sessions is not None  # uses_database: built, lazily connected
    runtime = Runtime(infra, checks={"database": database_ready(infra.engine)})
    redactor = storage_redactor(settings)  # None: text is stored raw
    return PersistenceService(
        runtime,
        buffers=BufferSet(),
        flusher=Flusher(infra.sessions, infra.registry, redactor.redact if redactor else None),
        retention=RetentionTask(persistence_purges, settings, infra.registry, infra.log),
    )
