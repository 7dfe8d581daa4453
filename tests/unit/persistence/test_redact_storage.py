"""Secrets at rest: persistence stores what the security hook would show, unless `redact_storage` is off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import load_settings
from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    ReplyTarget,
    RunFinished,
    RunStarted,
    ToolCall,
    ToolResult,
)
from agentstream.db import Message, Run, create_engine, session_factory, upgrade
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence

OPENAI_KEY = "sk-proj-" + "Qw72Er63Ty54Ui45Op36Zx81"
BOT_TOKEN = "123456789:AA" + "Hk3jW9qLmN0pRsTuVwXyZ4bCdEfGhIjKl"
ENV_SECRET = "plain-looking-connector-key-0042"  # no known shape: masked because a `*_env` names it
MASK = "[REDACTED]"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ROOT = "r-secret"


def events() -> list[object]:
    def ids(seq: int) -> dict[str, object]:
        return {
            "run_id": ROOT,
            "root_run_id": ROOT,
            "conversation_key": "telegram:5",
            "seq": seq,
            "ts": T0 + timedelta(seconds=seq),
        }

    question = f"my key is {OPENAI_KEY} and the bot token {BOT_TOKEN}"
    # Long arguments: the summary is shortened, which must not cut a secret into an unmasked half.
    arguments = '{"padding": "' + "x" * 150 + f'", "key": "{ENV_SECRET}", "token": "{BOT_TOKEN}"' + "}"
    answer = f"Stored {OPENAI_KEY} for bot {BOT_TOKEN}."
    return [
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="demo",
            session_id="s1",
            reply_target=ReplyTarget(platform="telegram", chat_id="5"),
            input=[ChatMessage(role="user", content=question)],
        ),
        ToolCall(**ids(2), call_id="c1", tool="vault", arguments=arguments),
        ToolResult(**ids(3), call_id="c1", tool="vault", ok=True, content=f"saved {OPENAI_KEY}"),
        MessageCompleted(**ids(4), message_id="m", text=answer),
        RunFinished(**ids(5), status="completed", text=answer),
    ]


@pytest.fixture
async def stored(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, async_sessionmaker[AsyncSession]]]:
    monkeypatch.setenv("TEST_CONNECTOR_KEY", ENV_SECRET)
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield db_url, session_factory(engine)
    await engine.dispose()


async def flush(db_url: str, sessions: async_sessionmaker[AsyncSession], **security: object) -> tuple[list[str], str]:
    settings = load_settings(
        database={"url": db_url},
        hooks={"security": security},
        connectors=[{"id": "demo", "type": "openai", "model": "m", "api_key_env": "TEST_CONNECTOR_KEY"}],
    )
    svc = bootstrap_persistence(settings)
    svc.sessions = sessions
    for ev in events():
        buf = svc.buffers.add(ev)  # type: ignore[arg-type]
    assert buf is not None and await svc.flush(buf)
    async with sessions() as s:
        contents = list((await s.scalars(select(Message.content).order_by(Message.seq))).all())
        run = await s.get(Run, ROOT)
    assert run is not None and len(contents) == 3
    return contents, run.text


async def test_stored_text_is_redacted_by_default(stored: tuple[str, async_sessionmaker[AsyncSession]]) -> None:
    contents, run_text = await flush(*stored)
    stored_text = "\n".join([*contents, run_text])
    for secret in (OPENAI_KEY, BOT_TOKEN, ENV_SECRET, OPENAI_KEY[:20], BOT_TOKEN[:20], ENV_SECRET[:20]):
        assert secret not in stored_text
    question, tool, answer = contents
    assert question == f"my key is {MASK} and the bot token {MASK}"
    assert tool.startswith('vault({"padding": "xxx') and tool.endswith(f"→ saved {MASK}")
    assert answer == run_text == f"Stored {MASK} for bot {MASK}."


async def test_redact_storage_false_stores_the_raw_text(stored: tuple[str, async_sessionmaker[AsyncSession]]) -> None:
    contents, run_text = await flush(*stored, redact_storage=False)
    question, tool, answer = contents
    assert question == f"my key is {OPENAI_KEY} and the bot token {BOT_TOKEN}"
    assert tool.endswith(f"→ saved {OPENAI_KEY}")
    assert answer == run_text == f"Stored {OPENAI_KEY} for bot {BOT_TOKEN}."


async def test_security_hook_off_stores_the_raw_text(stored: tuple[str, async_sessionmaker[AsyncSession]]) -> None:
    contents, run_text = await flush(*stored, enabled=False)
    assert OPENAI_KEY in contents[0] and BOT_TOKEN in run_text
