"""Two tenants' alices in the same web chat id (`alice`): neither sees the other's answers on their
page, and neither's model is given the other's messages as history (docs/security.md § Tenants)."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import pytest

from tests.e2e.conftest import poll_json
from tests.security.tenant_stack import WebPage, tenant_stack

BETA_SAYS = "beta's secret plan"
ACME_ASKS = "acme's own question"


@pytest.mark.timeout(180)  # a whole stack, two runs
async def test_one_tenants_page_and_model_see_nothing_of_another_tenant_in_the_same_chat_id(settings_factory):
    async with tenant_stack(settings_factory) as ts:
        acme_token, beta_token = await ts.web_session("acme"), await ts.web_session("beta")
        async with WebPage(ts.delivery, beta_token) as beta, WebPage(ts.delivery, acme_token) as acme:
            # beta talks first, and its message is stored (history a later run could be given).
            beta_accepted = await beta.post(BETA_SAYS)
            await beta.wait_final(BETA_SAYS)
            key = quote(beta_accepted["conversation_key"], safe="")
            await poll_json(
                f"{ts.stack.urls['persistence']}/v1/conversations/{key}/messages",
                lambda j: any(m["content"] == BETA_SAYS for m in j["items"]),
            )
            beta_seen = len(beta.frames)

            acme_accepted = await acme.post(ACME_ASKS)
            await acme.wait_final(ACME_ASKS)
            await asyncio.sleep(1.0)  # frames of one answer are published in order: any straggler is here by now

        assert acme_accepted["conversation_key"] != beta_accepted["conversation_key"]
        # beta's page got nothing of acme's answer, and acme's page nothing of beta's.
        assert beta.frames[beta_seen:] == []
        assert not [f for f in beta.frames if ACME_ASKS in f["text"]]
        assert not [f for f in acme.frames if BETA_SAYS in f["text"]]
        # The model call of acme's run: its own question, none of beta's messages.
        [acme_call] = [r for r in ts.model.requests if r.messages and r.messages[-1].get("content") == ACME_ASKS]
        contents = [str(m.get("content")) for m in acme_call.messages]
        assert ACME_ASKS in contents
        assert not [c for c in contents if BETA_SAYS in c]
