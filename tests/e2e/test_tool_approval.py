"""Tool approval through the whole in-process stack: a chat user's message makes the demo model
call `calculator`, configured `requires_approval`; the chat (delivery's in-memory platform)
shows what would run, and `/approve`, `/deny` or silence decide it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from agentstream.config import Settings
from agentstream.contracts import InboundMessage, RunFinished, ToolResult, User
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_testing.fixtures import ADMIN_HEADERS
from tests.e2e.conftest import DEMO_ANSWER
from tests.integration.ingress.test_stack import Tail

EXPIRY_S = 3.0
ADMIN = "boss"


def message(chat: str, text: str, user: str = "u-1") -> InboundMessage:
    return InboundMessage(id=str(uuid.uuid4()), platform="memory", chat_id=chat, user=User(id=user), text=text)


async def chat_shows(delivery_url: str, chat: str, fragment: str, timeout: float = 30) -> list[str]:
    """The chat's texts once one of them contains `fragment`."""
    # One slow answer (a loaded machine, the whole stack in this event loop) is waited for: only the
    # overall `timeout` bounds the wait.
    async with httpx.AsyncClient(timeout=timeout, headers=ADMIN_HEADERS) as http, asyncio.timeout(timeout):
        while True:
            resp = await http.get(f"{delivery_url}/v1/memory/chats/{chat}")
            texts = [m["text"] for m in resp.json()["messages"]] if resp.status_code == 200 else []
            if any(fragment in t for t in texts):
                return texts
            await asyncio.sleep(0.1)


@dataclass
class ApprovalChat:
    """A whole in-process stack whose calculator needs approval: `send` a chat message, `tail` its events."""

    send: Callable[[InboundMessage], Awaitable[None]]
    delivery: str
    tail: Tail


def finished_in(chat: str) -> Callable[[object], bool]:
    return lambda e: isinstance(e, RunFinished) and e.conversation_key == f"memory:{chat}" and bool(e.text)


def result_in(chat: str) -> Callable[[object], bool]:
    return lambda e: isinstance(e, ToolResult) and e.conversation_key == f"memory:{chat}"


@contextlib.asynccontextmanager
async def approval_chat(settings_factory: Callable[..., Settings], expiry_s: float) -> AsyncIterator[ApprovalChat]:
    settings = settings_factory(
        tools={"requires_approval": ["calculator"], "catalog_interval_s": 1.0},
        runner={"approval_expiry_s": expiry_s},
        authz={"default": {"allow_all": True, "admins": [ADMIN]}},
    )
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        catalog = stack.services["agent-runner"].tool_catalog
        async with asyncio.timeout(20):
            while not catalog.requires_approval("calculator"):  # noqa: ASYNC110 - the catalogue is polled, not signalled
                await asyncio.sleep(0.1)
        kafka, topics = stack.settings.kafka, stack.services["ingress"].topics
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        await producer.start()

        async def send(m: InboundMessage) -> None:
            await producer.send_and_wait(topics.inbound, m.model_dump_json().encode(), key=m.conversation_key.encode())

        try:
            async with Tail(kafka.bootstrap_servers, topics.events) as tail:
                yield ApprovalChat(send, stack.urls["delivery"], tail)
        finally:
            await producer.stop()


# The answers' test must not race the expiry: on a loaded machine an answer can take longer than a
# short expiry to reach the runner, and the call would expire instead of being denied. So the
# answers get the default expiry (10 min) and the expiry has a stack of its own, where nothing
# answers.
@pytest.mark.timeout(120)
async def test_approve_and_deny_in_the_chat(settings_factory):
    async with approval_chat(settings_factory, expiry_s=600.0) as chat:
        send, delivery, tail = chat.send, chat.delivery, chat.tail
        # The run's user approves (after a refused approval from someone else).
        await send(message("yes", "calculate 6*7"))
        texts = await chat_shows(delivery, "yes", "Approval needed")
        prompt = next(t for t in texts if "Approval needed" in t)
        assert "calculator" in prompt and "6*7" in prompt and "/approve" in prompt and "/deny" in prompt
        assert "expires in 10 min" in prompt
        await send(message("yes", "/approve", user="u-2"))
        await chat_shows(delivery, "yes", "Only the user who asked (u-1) or an admin")
        await send(message("yes", "/approve"))
        await chat_shows(delivery, "yes", DEMO_ANSWER)
        texts = await chat_shows(delivery, "yes", "Approved by u-1")
        result = await tail.wait(result_in("yes"))
        assert result.ok and result.content == "42"
        done = await tail.wait(finished_in("yes"))
        assert done.status == "completed" and done.text == DEMO_ANSWER

        # An admin denies someone else's call: a tool error, the run completes.
        await send(message("no", "calculate 6*7"))
        await chat_shows(delivery, "no", "Approval needed")
        await send(message("no", "/deny", user=ADMIN))
        await chat_shows(delivery, "no", f"Denied by {ADMIN}")
        result = await tail.wait(result_in("no"))
        assert not result.ok and result.error == "denied by user"
        done = await tail.wait(finished_in("no"))
        assert done.status == "completed" and done.text != DEMO_ANSWER

        # Nothing waits: said so.
        await send(message("idle", "/approve"))
        await chat_shows(delivery, "idle", "no tool call waiting for approval")


@pytest.mark.timeout(120)
async def test_unanswered_approval_expires_in_the_chat(settings_factory):
    async with approval_chat(settings_factory, expiry_s=EXPIRY_S) as chat:
        # Nobody answers: expires, with a notice; the model gets an error and the run goes on.
        await chat.send(message("silent", "calculate 6*7"))
        await chat_shows(chat.delivery, "silent", "Approval needed")
        await chat_shows(chat.delivery, "silent", f"expired after {EXPIRY_S:.0f} s", timeout=EXPIRY_S + 20)
        result = await chat.tail.wait(result_in("silent"))
        assert not result.ok and result.error.startswith("not run")
        done = await chat.tail.wait(finished_in("silent"))
        assert done.status == "completed"
