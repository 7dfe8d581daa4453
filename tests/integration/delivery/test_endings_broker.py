"""A run lost with its runner, on the real broker: persistence's watchdog publishes the ending,
delivery shows it in the platform's words, and a resumed attempt re-marks the partial text.

No runner runs: the test writes the first attempt's events and, later, the resumed attempt's
(same root run, later seq), as a runner would. Three chats: an edit platform that showed text,
a platform that cannot edit (a signed webhook), and an edit platform that showed nothing yet.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import EventBase, FinishReason, MessageDelta, ReplyTarget, RunFinished, RunStarted
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.render import ENDING_SEPARATOR, ENDING_TEXTS, RESUMED_MARKER, RESUMED_NOTICE
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fake_platforms.webhook import FakeWebhookReceiver
from agentstream_testing.kafka import RawRecord, read_until

pytestmark = pytest.mark.integration

LOST = ENDING_TEXTS[FinishReason.RUNNER_LOST]
PARTIAL = "The first half of an answer"
ANSWER = "The whole answer, resumed."
EDIT, HOOK, QUIET = (
    ReplyTarget(platform="memory", chat_id="shown"),
    ReplyTarget(platform="webhook", chat_id="hook"),
    ReplyTarget(platform="memory", chat_id="quiet"),
)


def key(target: ReplyTarget) -> str:
    return f"{target.platform}:{target.chat_id}"


def ids(target: ReplyTarget, seq: int) -> dict[str, object]:
    return {
        "run_id": f"run-{target.chat_id}",
        "root_run_id": f"run-{target.chat_id}",
        "conversation_key": key(target),
        "seq": seq,
    }


def attempt(target: ReplyTarget, first_seq: int, text: str, *, finish: bool) -> list[EventBase]:
    events: list[EventBase] = [
        RunStarted(**ids(target, first_seq), assistant_id="default", connector_id="demo", reply_target=target)
    ]
    words = text.split(" ") if text else []
    events += [
        MessageDelta(**ids(target, first_seq + 1 + k), message_id=f"m{first_seq}", text=w if k == 0 else " " + w)
        for k, w in enumerate(words)
    ]
    if finish:
        events.append(RunFinished(**ids(target, first_seq + 1 + len(words)), status="completed", text=text))
    return events


def lost_endings(records: list[RawRecord]) -> list[str]:
    return [r.key.decode() for r in records if r.key and b'"runner_lost"' in (r.value or b"")]


async def until(condition: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if condition():
                return
            await asyncio.sleep(0.05)


async def publish(settings: Settings, events: list[EventBase]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await producer.start()
    try:
        for ev in events:
            await producer.send_and_wait(
                f"{settings.kafka.topic_prefix}events", ev.to_json(), key=ev.conversation_key.encode()
            )
            await asyncio.sleep(0.02)  # paced like a model streams: previews are really edited
    finally:
        await producer.stop()


async def test_runner_lost_is_shown_per_capability_and_a_resume_re_marks_the_partial(
    settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
):
    async with FakeWebhookReceiver() as hook:
        monkeypatch.setenv("AGENTSTREAM_WEBHOOK_SECRET", hook.secret)
        settings = settings_factory(
            resume={"auto": False, "stale_after_s": 1.5, "watchdog_interval_s": 0.2},
            platforms={"webhook": {"api_url": f"{hook.url}/hook", "chat_interval": 0}},
        )
        delivery = bootstrap_delivery(settings, console=Console(file=io.StringIO()))
        persistence = bootstrap_persistence(settings)
        mem = delivery.memory
        async with ServiceHost(
            [persistence, delivery], "127.0.0.1", {s.name: free_port() for s in (persistence, delivery)}
        ):
            await publish(
                settings,
                [
                    *attempt(EDIT, 1, PARTIAL, finish=False),
                    *attempt(HOOK, 1, PARTIAL, finish=False),
                    *attempt(QUIET, 1, "", finish=False),
                ],
            )
            # Silence: the watchdog ends the three runs `failed(runner_lost)` (the events delivery reads).
            records = await read_until(
                settings.kafka.bootstrap_servers,
                f"{settings.kafka.topic_prefix}events",
                lambda rs: len(lost_endings(rs)) == 3,
                timeout=30,
            )
            assert sorted(lost_endings(records)) == sorted(key(t) for t in (EDIT, HOOK, QUIET))
            marked = PARTIAL + ENDING_SEPARATOR + LOST
            await mem.wait_for(EDIT.chat_id, lambda ms: [m.text for m in ms] == [marked] and ms[0].final, 20)
            await mem.wait_for(QUIET.chat_id, lambda ms: [m.text for m in ms] == [LOST], 20)
            await until(lambda: hook.texts(HOOK.chat_id) == [marked])  # the pending text, once, with the marker

            # The resumed attempts: same root runs, later seqs (what the runner emits after a ResumeRun).
            await publish(
                settings,
                [
                    *attempt(EDIT, 50, ANSWER, finish=True),
                    *attempt(HOOK, 50, ANSWER, finish=True),
                    *attempt(QUIET, 50, ANSWER, finish=True),
                ],
            )
            shown = await mem.wait_for(
                EDIT.chat_id, lambda ms: len(ms) == 2 and all(m.final for m in ms) and ms[0].text != marked, 20
            )
            quiet = await mem.wait_for(
                QUIET.chat_id, lambda ms: len(ms) == 2 and all(m.final for m in ms) and ms[0].text != LOST, 20
            )
            await until(lambda: len(hook.texts(HOOK.chat_id)) >= 2)
            await asyncio.sleep(0.5)  # nothing more may arrive

    assert [m.text for m in shown] == [PARTIAL + RESUMED_MARKER, ANSWER]
    assert shown[0].history[-2:] == [marked, PARTIAL + RESUMED_MARKER] and shown[1].history[0].endswith(" ▉")
    assert [m.text for m in quiet] == [RESUMED_NOTICE, ANSWER]
    # A platform that cannot edit keeps what it was sent: the marked partial, then the answer.
    assert hook.texts(HOOK.chat_id) == [marked, ANSWER]
    assert [m.text for m in mem.messages(EDIT.chat_id)] == [PARTIAL + RESUMED_MARKER, ANSWER]  # nothing twice
