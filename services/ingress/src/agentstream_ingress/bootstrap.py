"""Builds the ingress service: its infra and runtime, its collaborators made once from the
settings, then passed in."""

from __future__ import annotations

from agentstream.config import Settings
from agentstream.parts.readiness import database_ready
from agentstream.retention import RetentionTask
from agentstream.service import Infra, Runtime
from agentstream_ingress.app import IngressService
from agentstream_ingress.pipeline import Pipeline
from agentstream_ingress.retention import ingress_purges
from agentstream_ingress.store import DatabasePorts


def bootstrap(settings: Settings, service_class: type[IngressService] = IngressService) -> IngressService:
    """`service_class`: a subclass to build instead (tests replace the front door's producer)."""
    infra = Infra.build(settings, IngressService.name, uses_database=True)
    assert infra.engine is not None and infra.sessions is not None  # uses_database
    runtime = Runtime(infra, checks={"database": database_ready(infra.engine)})
    ports = DatabasePorts(infra.sessions, settings.authz.pairing)
    pipeline = Pipeline(settings, ports)
    retention = RetentionTask(ingress_purges, settings, infra.registry, infra.log)
    return service_class(runtime, pipeline, ports, retention)
