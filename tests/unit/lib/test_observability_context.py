"""A record's log fields: bound around its handling (`record_log_context`), or given to a task of
its own (`record_task_context`) without touching the caller's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import structlog

from agentstream.observability import record_log_context, record_task_context


async def test_a_task_started_in_a_record_context_logs_its_fields_and_the_caller_keeps_its_own() -> None:
    record = SimpleNamespace(run_id="child", root_run_id="root", conversation_key="web:a")

    async def fields() -> dict[str, object]:
        return structlog.contextvars.get_contextvars()

    with record_log_context("tool-executor"):
        around = structlog.contextvars.get_contextvars()
        in_task = await asyncio.create_task(fields(), context=record_task_context(None, record))
        assert structlog.contextvars.get_contextvars() == around  # nothing bound here
    with record_log_context("tool-executor", record):
        assert in_task == structlog.contextvars.get_contextvars()  # what the block binds
    assert in_task["service"] == "tool-executor" and in_task["run_id"] == "child"
    assert in_task["root_run_id"] == "root" and in_task["conversation_key"] == "web:a"
