"""Builds the agent-runner: every collaborator made here, from the infra and the settings,
and passed in (docs/code-map.md).

assistants (built-in + `assistants_dir`) → connectors → tool waiters and the live tool
catalogue (fed by the service's `tool-catalog` reader, read by runs) → `BrokerRunPorts`
(events and tool calls through the broker) → launcher (runs, resumes, dismissals) →
conversations (one owner per conversation) → the service, which only routes records.
"""

from __future__ import annotations

from typing import Any

from agentstream.config import Settings
from agentstream.parts.readiness import database_ready
from agentstream.service import Infra, Runtime
from agentstream.tool_call_signing import call_secret
from agentstream.tools_catalog import approval_selectors
from agentstream_runner.app import AgentRunnerService
from agentstream_runner.assistant_files import load_assistants_dir
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.context import RunContext
from agentstream_runner.conversations.registry import Conversations
from agentstream_runner.launcher import RunLauncher
from agentstream_runner.ports import BrokerRunPorts, ToolWaiters
from agentstream_runner.run_metrics import RunMetrics
from agentstream_runner.tool_catalog import ToolCatalog


def load_assistants(settings: Settings, log: Any) -> Assistants:
    """The built-in assistant and those of `assistants_dir`; a bad file is logged, the others load."""
    if not settings.assistants_dir:
        return Assistants(settings)
    loaded = load_assistants_dir(settings.assistants_dir)
    for problem in loaded.problems:
        log.error("assistant file invalid", file=problem.file, field=problem.field, error=problem.message)
    log.info("assistants loaded", ids=[a.id for a in loaded.assistants], invalid=len(loaded.problems))
    return Assistants(settings, loaded.assistants, loaded.hooks)


def bootstrap(settings: Settings, *, connectors: Connectors | None = None) -> AgentRunnerService:
    """The runner for `settings`; `connectors` replaces the configured ones (tests: fake models)."""
    secret = call_secret(settings.tools)  # first: a missing secret stops the start with the key to set
    # The database: history (`messages`) and role overrides (`role_settings`), read-only.
    infra = Infra.build(settings, AgentRunnerService.name, uses_database=True)
    assert infra.engine is not None  # uses_database
    runtime = Runtime(infra, checks={"database": database_ready(infra.engine)})
    assistants = load_assistants(settings, infra.log)
    tool_catalog = ToolCatalog(approval_selectors=approval_selectors(settings.tools))
    metrics = RunMetrics(infra.registry, {c.id: c.model for c in settings.connectors}, tools=tool_catalog)
    connectors = connectors or Connectors(settings, on_retry=metrics.llm_retry)
    waiters = ToolWaiters()
    shared = RunContext(
        BrokerRunPorts(infra.publisher, waiters, metrics, secret),
        connectors,
        assistants,
        settings.runner,
        tools=tool_catalog,
        tracing=infra.tracing,
    )
    launcher = RunLauncher(shared, infra.sessions, infra.log)
    conversations = Conversations(
        launcher.run,
        launcher.policy_for,
        launcher.dismiss,
        log=infra.log,
        collect_window_s=settings.runner.collect_window_ms / 1000,
    )
    return AgentRunnerService(
        runtime,
        connectors=connectors,
        launcher=launcher,
        conversations=conversations,
        waiters=waiters,
        tool_catalog=tool_catalog,
    )
