"""`kill -9` of agent-runner mid-answer: the user sees where the answer broke off, and the resumed
answer below a marked partial attempt.

The runner is a child process; persistence, tool-executor and delivery (against a fake Telegram,
a real HTTP server) run in this process. With `resume.auto` on, persistence's watchdog ends each
run `failed(runner_lost)`, delivery finalises the partial preview with the runner_lost marker, a
restarted runner resumes the run, and delivery re-marks the partial message ("resumed below")
before the full answer streams into a message of its own. Asserted per chat: exactly two platform
messages (the marked partial, the exact answer), no cursor, nothing posted twice, no ledger row
left `pending`/`sending`, no stream left open.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentstream.config import TextFormat
from agentstream.contracts import (
    FinishReason,
    MessageDelta,
    ReplyTarget,
    RunEventAdapter,
    RunFinished,
    RunStatus,
    StartRun,
    User,
)
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.formatting import render
from agentstream_delivery.render import ENDING_SEPARATOR, ENDING_TEXTS, RESUMED_MARKER
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.chaos.processes import ServiceProcess, service_env

pytestmark = pytest.mark.chaos

RUNS = 3
WORDS = 24
TOKEN_DELAY_S = 0.2  # each answer streams for ~5 s: the kill lands mid-answer
LOST_MARKER = ENDING_SEPARATOR + ENDING_TEXTS[FinishReason.RUNNER_LOST]
TELEGRAM = {"chat_interval": "0.1", "edit_interval": "0.3", "buffer_threshold": "20", "drafts": "false"}


def shown(text: str) -> str:
    """What the chat shows of a text: delivery renders it as Telegram HTML."""
    return render(text, TextFormat.TELEGRAM_HTML)


def chat(i: int) -> str:
    return f"-{7100 + i}"  # a group chat: previews are edited messages


def question(i: int) -> str:
    return f"chat {i} says " + " ".join(f"w{i}.{k}" for k in range(WORDS))  # echoed back as the answer


def events(records: list[RawRecord]) -> list[object]:
    return [RunEventAdapter.validate_json(r.value) for r in records if r.value]


def endings(records: list[RawRecord]) -> list[RunFinished]:
    return [e for e in events(records) if isinstance(e, RunFinished)]


def partial_of(records: list[RawRecord], run_id: str, before_seq: int) -> str:
    """What the first attempt streamed before the runner died: the text delivery showed."""
    return "".join(
        e.text
        for e in events(records)
        if isinstance(e, MessageDelta) and e.root_run_id == run_id and e.kind == "text" and e.seq < before_seq
    )


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                if condition():
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def ledger_states(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT state FROM delivery_ledger")]


async def test_runner_lost_mid_answer_is_shown_then_the_resumed_answer_below_a_marked_partial(
    kafka_bootstrap, topic_prefix, tmp_path, monkeypatch
):
    db = tmp_path / "chaos.db"
    async with FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake, FakeTelegram() as tg:
        monkeypatch.setenv("CHAOS_TG_TOKEN", tg.token)
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{db}",
            connectors=connectors,
            default_connector="fake",
            # resume.auto set explicitly: this test is about what the user sees across the resume.
            resume={"auto": True, "stale_after_s": 2.0, "watchdog_interval_s": 0.2, "max_attempts": 1},
            platforms={"telegram": {**TELEGRAM, "api_url": tg.url, "token_env": "CHAOS_TG_TOKEN"}},
        )
        await create_topics(settings.kafka)
        env = service_env(
            settings,
            connectors=connectors,
            default_connector="fake",
            runner__heartbeat_s="0.5",
            runner__coalesce_ms="10",
        )
        port = free_port()
        first = ServiceProcess("agent-runner", env, port, tmp_path, "first")
        second = ServiceProcess("agent-runner", env, port, tmp_path, "second")
        persistence, tools, delivery = (
            bootstrap_persistence(settings),
            bootstrap_tool_executor(settings),
            bootstrap_delivery(settings),
        )
        starts = [
            StartRun(
                run_id=f"lost-{i}",
                conversation_key=f"telegram:{chat(i)}",
                assistant_id="default",
                user=User(id="u1"),
                text=question(i),
                reply_target=ReplyTarget(platform="telegram", chat_id=chat(i)),
            )
            for i in range(RUNS)
        ]
        bootstrap, events_topic = settings.kafka.bootstrap_servers, f"{topic_prefix}events"
        chats = [chat(i) for i in range(RUNS)]
        try:
            host = ServiceHost(
                [persistence, tools, delivery],
                "127.0.0.1",
                {s.name: free_port() for s in (persistence, tools, delivery)},
            )
            try:
                await asyncio.gather(host.start(), first.start())
                for s in starts:
                    await produce_raw(bootstrap, f"{topic_prefix}runs", s.to_json(), key=s.conversation_key.encode())
                # Mid-answer: every chat shows a preview that was edited at least once.
                await until(
                    lambda: all(tg.messages(c) and tg.messages(c)[0].edits >= 1 for c in chats),
                    60,
                    "a streaming preview in every chat",
                )
                first.kill9()

                # The watchdog ends each run `failed(runner_lost)`; delivery shows it in the partial message.
                records = await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= RUNS, timeout=30)
                lost = {e.root_run_id: e for e in endings(records)}
                assert {(e.status, e.reason) for e in lost.values()} == {(RunStatus.FAILED, FinishReason.RUNNER_LOST)}
                partials = {s.run_id: partial_of(records, s.run_id, lost[s.run_id].seq) for s in starts}
                assert all(0 < len(p) < len(question(i)) for i, p in enumerate(partials.values())), partials
                await until(
                    lambda: all(
                        tg.texts(chat(i)) == [shown(partials[s.run_id] + LOST_MARKER)] for i, s in enumerate(starts)
                    ),
                    20,
                    "the runner_lost marker in every chat",
                )

                # resume.auto: a restarted runner resumes each run; the partial is re-marked, the answer follows.
                await second.start()
                records = await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= 2 * RUNS, timeout=90)
                done = {e.root_run_id: e for e in endings(records) if e.status is RunStatus.COMPLETED}
                assert {e.text for e in done.values()} == {question(i) for i in range(RUNS)}
                expected = {
                    chat(i): [partials[s.run_id] + RESUMED_MARKER, done[s.run_id].text] for i, s in enumerate(starts)
                }
                await until(
                    lambda: (
                        all(tg.texts(c) == [shown(t) for t in texts] for c, texts in expected.items())
                        and not delivery.streams.all()
                    ),
                    60,
                    "the marked partial and the answer in every chat",
                )
            finally:
                await host.stop()
        finally:
            first.stop()
            second.stop()

    exact = duplicates = missing = 0
    for c, texts in expected.items():
        on_platform = tg.texts(c)
        sends = tg.calls_to(c, "sendMessage")
        exact += on_platform == [shown(t) for t in texts]
        duplicates += max(0, sum(call.status == 200 for call in sends) - len(texts))
        missing += shown(texts[-1]) not in on_platform
        # The user saw why the answer broke off before the resume re-marked it.
        assert tg.messages(c)[0].history[-2:] == [
            shown(texts[0].removesuffix(RESUMED_MARKER) + LOST_MARKER),
            shown(texts[0]),
        ]
        assert not any("▉" in t for t in on_platform) and not any(m.deleted for m in tg.messages(c))
    print(
        "\n| fault | runs | exact finals | duplicates | lost |\n|---|---|---|---|---|\n"
        f"| agent-runner kill -9 mid-answer, resume.auto | {RUNS} | {exact} | {duplicates} | {missing} |"
    )
    assert (exact, duplicates, missing) == (RUNS, 0, 0)
    states = ledger_states(db)
    assert "pending" not in states and "sending" not in states, states
