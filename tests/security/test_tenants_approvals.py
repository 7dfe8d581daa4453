"""A tool call waiting for approval in tenant acme's chat `alice` cannot be approved by tenant beta's
`alice`, though both post into a chat of that id as a user of that id (docs/security.md § Tenants)."""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import Notice, RunEvent, RunFinished, ToolResult
from agentstream_runner.tool_approval import EXPIRED_ERROR
from tests.integration.ingress.test_stack import Tail
from tests.security.tenant_stack import tenant_stack

EXPIRY_S = 8.0


@pytest.mark.timeout(180)  # a whole stack, and one approval left to expire
async def test_another_tenants_approve_does_not_run_the_call(settings_factory):
    overrides = {
        "tools": {"requires_approval": ["calculator"], "catalog_interval_s": 1.0},
        "runner": {"approval_expiry_s": EXPIRY_S},
    }
    async with tenant_stack(settings_factory, **overrides) as ts:
        ts.model.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        ts.model.add_turn(text="Nothing was calculated.")
        catalog = ts.stack.services["agent-runner"].tool_catalog
        async with asyncio.timeout(20):
            while not catalog.requires_approval("calculator"):  # noqa: ASYNC110 - the catalogue is polled
                await asyncio.sleep(0.1)
        topics = ts.stack.services["ingress"].topics
        async with Tail(ts.stack.settings.kafka.bootstrap_servers, topics.events) as tail:
            acme_key = (await ts.post("acme", "calculate 6*7"))["conversation_key"]

            def in_acme(kind: type[RunEvent]):  # type: ignore[no-untyped-def]
                return lambda e: isinstance(e, kind) and e.conversation_key == acme_key

            asked = await tail.wait(lambda e: in_acme(Notice)(e) and e.approval is not None)
            assert asked.approval is not None and asked.approval.user_id == "alice"

            beta_key = (await ts.post("beta", "/approve"))["conversation_key"]
            # acme's call is never approved: it expires, unrun.
            result = await tail.wait(in_acme(ToolResult), timeout=EXPIRY_S + 30)
            assert not result.ok and result.error == EXPIRED_ERROR, result
            await tail.wait(in_acme(RunFinished))
            # beta's /approve went to beta's own conversation, where nothing waits: it was told so.
            assert beta_key != acme_key
            said = await tail.wait(lambda e: isinstance(e, Notice) and e.conversation_key == beta_key)
            assert "no tool call waiting for approval" in said.text
        approved = [e for e in tail.events if isinstance(e, Notice) and "Approved by" in e.text]
        assert approved == []
