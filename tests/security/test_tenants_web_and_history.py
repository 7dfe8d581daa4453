"""Two tenants' alices in the same web chat id (`alice`): neither sees the other's answers on their
page, and neither's model is given the other's messages as history (docs/security.md § Tenants).

One scenario, two checks: beta talks first (its message stored, history a later run could be given),
then acme asks while both pages are open."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from agentstream_testing.fake_openai import ReceivedRequest
from tests.e2e.conftest import poll_json
from tests.security.tenant_stack import WebPage, tenant_stack

BETA_SAYS = "beta's secret plan"
ACME_ASKS = "acme's own question"


@dataclass(frozen=True)
class Seen:
    beta_frames: list[dict[str, Any]]
    beta_frames_before_acme: int
    acme_frames: list[dict[str, Any]]
    model_calls: list[ReceivedRequest]
    keys: tuple[str, str]  # acme's and beta's conversation keys


async def beta_then_acme(settings_factory: Any) -> Seen:
    async with tenant_stack(settings_factory) as ts:
        acme_token, beta_token = await ts.web_session("acme"), await ts.web_session("beta")
        async with WebPage(ts.delivery, beta_token) as beta, WebPage(ts.delivery, acme_token) as acme:
            beta_key = (await beta.post(BETA_SAYS))["conversation_key"]
            await beta.wait_final(BETA_SAYS)
            await poll_json(
                f"{ts.stack.urls['persistence']}/v1/conversations/{quote(beta_key, safe='')}/messages",
                lambda j: any(m["content"] == BETA_SAYS for m in j["items"]),
            )
            before = len(beta.frames)
            acme_key = (await acme.post(ACME_ASKS))["conversation_key"]
            await acme.wait_final(ACME_ASKS)
            await asyncio.sleep(1.0)  # frames of one answer are published in order: any straggler is here by now
        return Seen(list(beta.frames), before, list(acme.frames), list(ts.model.requests), (acme_key, beta_key))


@pytest.mark.timeout(180)  # a whole stack, two runs
async def test_another_tenants_page_of_the_same_chat_id_gets_nothing(settings_factory):
    seen = await beta_then_acme(settings_factory)
    assert seen.beta_frames[seen.beta_frames_before_acme :] == []
    assert not [f for f in seen.beta_frames if ACME_ASKS in f["text"]]
    assert not [f for f in seen.acme_frames if BETA_SAYS in f["text"]]
    assert [f for f in seen.acme_frames if f["final"] and ACME_ASKS in f["text"]]  # acme's own page did get it


@pytest.mark.timeout(180)  # a whole stack, two runs
async def test_the_model_is_given_only_its_own_tenants_history(settings_factory):
    seen = await beta_then_acme(settings_factory)
    [acme_call] = [r for r in seen.model_calls if r.messages and r.messages[-1].get("content") == ACME_ASKS]
    contents = [str(m.get("content")) for m in acme_call.messages]
    assert not [c for c in contents if BETA_SAYS in c], contents
    assert seen.keys[0] != seen.keys[1]  # two conversations
