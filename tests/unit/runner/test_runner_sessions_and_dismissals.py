"""Sessions (reset opens a new one) on both engines, and how runs that never ran end."""

from __future__ import annotations

import structlog

from agentstream.config import load_settings
from agentstream.contracts import EventBase, Notice, ReplyTarget, RunFinished, StartRun
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_runner.assistants import Assistants
from agentstream_runner.chat_sessions import SessionStore
from agentstream_runner.connectors import Connectors
from agentstream_runner.conversation import Dismissal
from agentstream_runner.ownership import REJECTED_TEXT, RunLauncher


async def test_a_conversation_keeps_its_session_until_reset(db_url):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        store = SessionStore(session_factory(engine))
        first = await store.current("web:c1")
        assert await store.current("web:c1") == first
        assert await store.current("web:c2") != first
        new = await store.reset("web:c1")
        assert new != first and await store.current("web:c1") == new
    finally:
        await engine.dispose()


class Ports:
    def __init__(self) -> None:
        self.events: list[EventBase] = []

    async def publish_event(self, event: EventBase) -> None:
        self.events.append(event)

    async def call_tool(self, request):  # pragma: no cover - never called
        raise AssertionError


async def test_runs_that_never_ran_still_end_once():
    settings = load_settings()
    ports = Ports()
    launcher = RunLauncher(
        ports, Connectors(settings), Assistants(settings), settings.runner, lambda: None, structlog.get_logger()
    )

    def start(run_id: str) -> StartRun:
        return StartRun(
            run_id=run_id,
            conversation_key="web:c1",
            assistant_id="default",
            text="x",
            reply_target=ReplyTarget(platform="web", chat_id="c1"),
        )

    await launcher.dismiss(start("rej"), Dismissal.REJECTED, "a run is already in progress")
    await launcher.dismiss(start("mer"), Dismissal.MERGED, "first")
    await launcher.dismiss(start("reb"), Dismissal.DROPPED, "rebalanced")
    await launcher.dismiss(start("shu"), Dismissal.DROPPED, "shutdown")
    notice, *endings = ports.events
    assert isinstance(notice, Notice) and notice.text == REJECTED_TEXT and notice.run_id == "rej"
    assert notice.reply_target == ReplyTarget(platform="web", chat_id="c1")
    assert all(isinstance(e, RunFinished) for e in endings)
    assert [(e.run_id, e.status, e.reason) for e in endings] == [
        ("rej", "failed", "rejected"),
        ("mer", "completed", "merged"),
        ("reb", "failed", "rebalanced"),
        ("shu", "interrupted", "shutdown"),
    ]
    assert [e.seq for e in ports.events] == [1, 2, 1, 1, 1]  # after the run.queued (seq 0) of each
