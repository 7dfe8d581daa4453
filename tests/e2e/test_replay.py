"""`agentstream replay` on the whole embedded stack: a run with a tool call, answered in one chat, shown
again on a fake Telegram (a real HTTP server) and on the console, each formatted for its platform,
while the original's delivery ledger and stored run stay as they were."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from sqlalchemy import select

from agentstream.config import Settings, TextFormat
from agentstream.db import Run, create_engine, session_factory
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.db.models_persistence import RunEventRow
from agentstream_delivery.formatting import render
from agentstream_delivery.render import TOOL_LINE_PREFIX
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.run_follower import send_and_follow
from agentstream_testing.fake_platforms import FakeTelegram
from tests.e2e.conftest import DEMO_ANSWER, inbound, poll_json
from tests.e2e.processes import AGENTSTREAM

LEDGER_COLUMNS = ("segment", "platform", "chat_id", "state", "final", "text_sha256", "platform_message_id")


async def _rows(url: str, model: Any, *where: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as s:
            return list((await s.scalars(select(model).where(*where))).all())
    finally:
        await engine.dispose()


async def _ledger(url: str, root_run_id: str) -> list[tuple[Any, ...]]:
    rows = await _rows(url, DeliveryLedger, DeliveryLedger.root_run_id == root_run_id)
    return sorted(tuple(getattr(r, c) for c in LEDGER_COLUMNS) for r in rows)


async def _replay(config: Path, run_id: str, to: str) -> dict[str, Any]:
    """The command as a user runs it: its own process, reading the stack's config file."""
    proc = await asyncio.create_subprocess_exec(
        *AGENTSTREAM,
        "replay",
        run_id,
        "--to",
        to,
        "--json",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=config.parent,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def _until(check: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 - polls what other tasks and servers change
            await asyncio.sleep(0.1)


def _client_config(settings: Settings, path: Path) -> Path:
    kafka = settings.kafka
    doc = {
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers, "topic_prefix": kafka.topic_prefix},
        "database": {"url": settings.database.url},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.timeout(120)  # a whole stack, one model run and two replays
async def test_a_run_with_a_tool_call_replays_onto_telegram_and_the_console(
    settings_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async with FakeTelegram() as tg:
        monkeypatch.setenv("REPLAY_TG_TOKEN", tg.token)
        settings = settings_factory(
            platforms={"telegram": {"api_url": tg.url, "token_env": "REPLAY_TG_TOKEN", "chat_interval": 0.2}}
        )
        terminal = io.StringIO()
        console = Console(file=terminal, width=200)
        async with embedded_stack(
            settings, start_broker=False, ports=free_ports(), state_file=None, console=console
        ) as stack:
            url = stack.settings.database.url
            msg = inbound()
            finished = (await send_and_follow(stack.settings.kafka, msg, timeout=60))[-1]
            run_id = finished.root_run_id
            assert finished.text == DEMO_ANSWER
            await poll_json(f"{stack.urls['persistence']}/v1/runs/{run_id}", lambda j: j["status"] == "completed")
            archived = [r.type for r in await _rows(url, RunEventRow, RunEventRow.root_run_id == run_id)]
            assert archived[0] == "run.started" and archived[-1] == "run.finished" and "tool.call" in archived
            assert terminal.getvalue() == ""  # the original was answered in another chat
            await poll_json(
                f"{stack.urls['delivery']}/v1/memory/chats/{msg.chat_id}",
                lambda j: any(m["text"] == DEMO_ANSWER for m in j["messages"]),
            )
            await _until(lambda: not stack.services["delivery"].streams.all())  # its ledger rows are final
            original_ledger = await _ledger(url, run_id)
            assert original_ledger and all(row[3] == "sent" for row in original_ledger)

            config = _client_config(stack.settings, tmp_path / "client.yaml")
            on_telegram = await _replay(config, run_id[:12], "telegram:-9001")
            on_console = await _replay(config, run_id, "console")

            answer_tg = render(DEMO_ANSWER, TextFormat.TELEGRAM_HTML)
            await _until(lambda: answer_tg in tg.texts("-9001"))
            await _until(lambda: DEMO_ANSWER in terminal.getvalue())
            replays = (on_telegram["replay_id"], on_console["replay_id"])
            await _until(lambda: len(stack.services["delivery"].streams.all()) == 0)

            # Telegram: the tool's progress line, then the answer in Telegram's HTML, each once.
            texts = tg.texts("-9001")
            assert texts == [TOOL_LINE_PREFIX + "calculator …", answer_tg]
            assert len(tg.calls_to("-9001", "sendMessage")) == len(texts)
            # The console: no tool lines there, the answer in plain text.
            assert terminal.getvalue().strip() == render(DEMO_ANSWER, TextFormat.PLAIN)

            # Each replay has its own ledger scope; the original's rows are as they were.
            assert [r[3] for r in await _ledger(url, replays[0])] == ["sent", "sent"]
            assert await _ledger(url, replays[1])
            assert await _ledger(url, run_id) == original_ledger
            assert on_telegram["replay_of"] == on_console["replay_of"] == run_id

    # Persistence stored nothing of the replays: one run, the original.
    stored = await _rows(url, Run, Run.run_id.in_([run_id, *replays]))
    assert [r.run_id for r in stored] == [run_id]
    assert not await _rows(url, RunEventRow, RunEventRow.root_run_id.in_(replays))
