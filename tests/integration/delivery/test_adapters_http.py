"""The stream actor against fake platform servers speaking the real HTTP protocols.

No Kafka here: a `StreamActor` is fed run inputs directly, with real time, and talks
through the real adapters to the fakes; the fakes' call records are the evidence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import (
    DiscordAdapter,
    PlatformAdapter,
    SignalAdapter,
    SlackAdapter,
    TelegramAdapter,
    WebhookAdapter,
)
from agentstream_delivery.formatting import plain, render
from agentstream_delivery.ledger import MemoryLedger
from agentstream_delivery.ratelimit import RateLimiter
from agentstream_delivery.splitting import utf16_len
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Break, Finish, StreamInput, TextDelta, ToolStarted
from agentstream_testing.fake_platforms import (
    Failure,
    FakeDiscord,
    FakePlatform,
    FakeSignal,
    FakeSlack,
    FakeTelegram,
    FakeWebhookReceiver,
    signature,
    telegram_html,
)

LOG = structlog.get_logger("test")


def actor(
    adapter: PlatformAdapter,
    chat: str,
    run: str = "r1",
    limiter: RateLimiter | None = None,
    ledger: MemoryLedger | None = None,
    late_landing_s: float = 15.0,
) -> StreamActor:
    target = ReplyTarget(platform=adapter.platform, chat_id=chat)
    limiter = limiter or RateLimiter()
    a = StreamActor(
        StreamKey.of(run, target),
        target,
        adapter,
        LOG,
        ledger=ledger or MemoryLedger(),
        conversation_key=f"{adapter.platform}:{chat}",
        gate=limiter.gate(adapter.platform, "bot", chat, adapter.capabilities.chat_interval),
        late_landing_s=late_landing_s,
    )
    a.start()
    return a


async def stream(a: StreamActor, inputs: Sequence[StreamInput], pause: float = 0.0) -> None:
    for inp in inputs:
        a.feed(inp)
        if pause:
            await asyncio.sleep(pause)
    assert a.task is not None
    await asyncio.wait_for(a.task, 60)


def deltas(text: str, size: int = 20, mid: str = "m1") -> list[StreamInput]:
    return [TextDelta(mid, text[i : i + size]) for i in range(0, len(text), size)]


def sends(fake: FakePlatform, chat: str, method: str) -> int:
    return len([c for c in fake.calls_to(chat, method) if c.status in (200, 201)])


# -- two segments around a tool call ------------------------------------------------------------
async def test_two_segments_around_a_tool_call_on_telegram():
    async with FakeTelegram() as tg:
        a = actor(TelegramAdapter(tg.token, api_url=tg.url), "-100")
        await stream(
            a,
            [
                *deltas("Let me calculate that."),
                ToolStarted("calculator"),
                Break(),
                *deltas("6*7 is 42.", mid="m2"),
                Finish("completed", text="6*7 is 42."),
            ],
            pause=0.05,
        )
    assert tg.texts("-100") == ["Let me calculate that.", "🔧 calculator …", "6*7 is 42."]
    assert all(len(m.history) >= 1 and not m.text.endswith("▉") for m in tg.messages("-100"))


# -- length measured in UTF-16, fences balanced -------------------------------------------------
async def test_telegram_split_by_utf16_and_fences_balanced():
    rockets = "🚀" * 2200
    code = "\n".join(f"print('line {i}')" for i in range(500))
    answer = "Program:\n\n```python\n" + code + "\n```\n\n" + "Explained at length. " * 100
    assert len(answer) > 9000
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        await asyncio.gather(
            stream(actor(adapter, "-1", "r1"), [*deltas(rockets, 100), Finish("completed", text=rockets)]),
            stream(actor(adapter, "-2", "r2"), [*deltas(answer, 200), Finish("completed", text=answer)]),
        )
        await adapter.close()
    assert [utf16_len(t) for t in tg.texts("-1")] == [utf16_len(t) for t in tg.texts("-1")]
    assert len(tg.texts("-1")) == 2 and all(utf16_len(t) <= 4096 for t in tg.texts("-1"))
    assert "".join(tg.texts("-1")) == rockets
    texts = tg.texts("-2")
    shown = [telegram_html.parse(t) for t in texts]  # what the chat shows of each HTML message
    assert len(texts) >= 3 and all(utf16_len(s) <= 4096 for s in shown)
    # The code block is cut between lines: each part is a whole <pre> with its language, no line lost.
    code_parts = [t for t in texts if '<pre><code class="language-python">' in t]
    assert len(code_parts) >= 2 and all(t.count("<pre>") == t.count("</pre>") for t in texts)
    assert [line for s in shown for line in s.split("\n") if line.startswith("print(")] == code.split("\n")
    assert tg.count(400) == 0  # nothing too long and no markup the Bot API refuses was ever attempted


# -- "not modified" is success; a timed-out send still gets its final ---------------------------------
async def test_not_modified_never_breaks_a_stream():
    async with FakeTelegram() as tg:
        tg.fail_next(
            "editMessageText",
            Failure(
                400,
                {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: message is not modified: specified new message content and reply markup are "
                    "exactly the same",
                },
            ),
        )
        a = actor(TelegramAdapter(tg.token, api_url=tg.url), "-5")
        answer = "The stream goes on regardless of what the platform says. " * 6
        await stream(a, [*deltas(answer, 10), Finish("completed", text=answer)], pause=0.1)
    edits = tg.calls_to("-5", "editMessageText")
    assert edits[0].status == 400 and len(edits) >= 2  # treated as success: the stream went on
    assert len({c.body["text"] for c in edits}) == len(edits)  # and that frame was not retried
    assert tg.texts("-5") == [render(answer, TextFormat.TELEGRAM_HTML)]


async def test_timed_out_send_is_unknown_and_its_orphan_is_found_and_deleted():
    ledger = MemoryLedger()
    answer = "Hello there, a send that times out."
    async with FakeTelegram() as tg:
        tg.lose_answer("sendMessage", 1.5)  # the preview is posted; its answer comes too late
        a = actor(TelegramAdapter(tg.token, api_url=tg.url, timeout=0.5), "-6", ledger=ledger, late_landing_s=2.0)
        await stream(a, [*deltas(answer), Finish("completed")], pause=0.02)
    sends = tg.calls_to("-6", "sendMessage")
    assert len(sends) == 2  # the final went out as a new message
    orphan = tg.chats["-6"][0]
    assert orphan.text == sends[0].body["text"] and orphan.deleted  # the stub the lost answer left, gone
    assert tg.texts("-6") == [answer]
    probes = tg.calls_to("-6", "editMessageText")
    assert [p.body["message_id"] for p in probes] == [orphan.message_id]  # N-1 first: it landed before N
    assert orphan.history == [orphan.text]  # the probe never changed it
    assert [e.state for e in ledger.rows.values()] == ["sent"]


async def test_first_send_landing_after_the_timeout_is_found_above_the_final_and_deleted():
    answer = "The first frame reaches the chat only after the client gave up on it."
    async with FakeTelegram() as tg:
        # No answer; applied right after the final's own send took effect (ordered by the fake, not by time).
        tg.land_after("sendMessage", "-7", applied=1)
        a = actor(TelegramAdapter(tg.token, api_url=tg.url, timeout=0.3), "-7", late_landing_s=1.5)
        await stream(a, [*deltas(answer), Finish("completed")], pause=0.02)
    first, final = tg.calls_to("-7", "sendMessage")[:2]
    orphan = next(m for m in tg.chats["-7"] if m.text == first.body["text"])
    assert int(orphan.message_id) > int(final.message_id or 0) and orphan.deleted
    assert tg.texts("-7") == [answer]
    assert len(tg.calls_to("-7", "deleteMessage")) == 1


async def test_orphan_probe_never_touches_another_runs_message_of_the_chat():
    ledger = MemoryLedger()
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url, timeout=0.5)
        await stream(actor(adapter, "-8", "r0", ledger=ledger), [Finish("completed", text="The earlier answer.")])
        earlier = tg.messages("-8")[0]
        tg.lose_answer("sendMessage", 1.5)
        answer = "The next answer, whose first send times out."
        a = actor(adapter, "-8", "r1", ledger=ledger, late_landing_s=2.0)
        await stream(a, [*deltas(answer), Finish("completed")], pause=0.02)
    assert earlier.history == ["The earlier answer."]  # known to the ledger: never probed
    assert earlier.message_id not in [c.body["message_id"] for c in tg.calls_to("-8", "editMessageText")]
    assert tg.texts("-8") == ["The earlier answer.", answer]


async def test_discord_resent_create_returns_the_first_message_by_its_nonce():
    answer = "Discord answers a repeated create with the message the first one made."
    async with FakeDiscord() as dc:
        dc.lose_answer("create", 1.5, chat_id="c9")  # created, but its answer comes too late
        a = actor(DiscordAdapter(dc.token, api_url=dc.url, timeout=0.5), "c9", late_landing_s=2.0)
        await stream(a, [*deltas(answer), Finish("completed")], pause=0.02)
    creates = dc.calls_to("c9", "create")
    assert len(creates) == 2 and creates[0].body["nonce"] == creates[1].body["nonce"]
    assert all(c.body["enforce_nonce"] is True and len(c.body["nonce"]) <= 25 for c in creates)
    assert creates[0].message_id == creates[1].message_id  # no second message
    assert dc.texts("c9") == [answer]


async def test_discord_nonces_differ_per_message():
    async with FakeDiscord() as dc:
        a = actor(DiscordAdapter(dc.token, api_url=dc.url), "c10")
        inputs = [*deltas("First."), ToolStarted("calculator"), Break(), *deltas("Second.", mid="m2")]
        await stream(a, [*inputs, Finish("completed", text="Second.")], pause=0.05)
    creates = dc.calls_to("c10", "create")
    assert len(creates) == 3 and len({c.body["nonce"] for c in creates}) == 3
    assert dc.texts("c10") == ["First.", "🔧 calculator …", "Second."]


# -- drafts in private chats ---------------------------------------------------------------------
async def test_private_chat_streams_one_draft_then_a_real_message():
    answer = "Drafted text that grows and grows while the model writes. " * 3
    async with FakeTelegram() as tg:
        a = actor(TelegramAdapter(tg.token, api_url=tg.url), "777")
        await stream(a, [*deltas(answer, 10), Finish("completed", text=answer)], pause=0.1)
    drafts = tg.calls_to("777", "sendMessageDraft")
    assert len(drafts) >= 2 and len({c.body["draft_id"] for c in drafts}) == 1
    assert all(c.body["text"].endswith(" ▉") for c in drafts)
    assert [c.body["text"] for c in tg.calls_to("777", "sendMessage")] == [render(answer, TextFormat.TELEGRAM_HTML)]
    assert tg.calls_to("777", "editMessageText") == []


async def test_first_draft_failure_switches_to_edits():
    answer = "Edits take over once drafts are refused by the server. " * 3
    async with FakeTelegram(drafts=False) as tg:
        a = actor(TelegramAdapter(tg.token, api_url=tg.url), "778")
        await stream(a, [*deltas(answer, 10), Finish("completed", text=answer)], pause=0.1)
    assert len(tg.calls_to("778", "sendMessageDraft")) == 1
    assert len(tg.calls_to("778", "sendMessage")) == 1 and len(tg.calls_to("778", "editMessageText")) >= 1
    assert tg.texts("778") == [render(answer, TextFormat.TELEGRAM_HTML)]


# -- platforms that cannot edit ------------------------------------------------------------------
async def test_signal_gets_only_final_messages_split_by_its_limit():
    answer = ("A paragraph that is long enough to matter. " * 12 + "\n\n") * 8
    async with FakeSignal() as sig:
        a = actor(SignalAdapter(sig.number, api_url=sig.url), "+15551234567")
        await stream(a, [*deltas(answer, 25), ToolStarted("t"), Finish("completed", text=answer)], pause=0.005)
    texts = sig.texts("+15551234567")
    assert len(texts) >= 2 and all(utf16_len(t) <= 2000 for t in texts)
    assert "\n\n".join(texts) == plain(answer)  # cut between paragraphs, each one plain text
    assert len(sig.calls) == len(texts)  # every call a final message: no previews, no tool line


async def test_webhook_receives_one_correctly_signed_post():
    async with FakeWebhookReceiver(secret="s3cret") as hook:
        a = actor(WebhookAdapter("s3cret", hook.url + "/hook"), "ops")
        await stream(a, [*deltas("Build 42 passed."), Finish("completed", text="Build 42 passed.")])
    assert [c.body["text"] for c in hook.calls] == ["Build 42 passed."]
    assert hook.calls[0].body["valid"] is True and hook.calls[0].status == 200
    assert signature("s3cret", b"{}") != signature("other", b"{}")


# -- Slack and Discord: their own shapes, their own rate-limit spelling ----------------------------
async def test_slack_and_discord_stream_and_honour_their_429s():
    answer = "Streaming to chat platforms with edits in place. " * 3
    async with FakeSlack() as slack, FakeDiscord() as discord:
        slack.fail_next("chat.update", Failure(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}))
        discord.fail_next("edit", Failure(429, {"message": "slow", "retry_after": 0.7, "global": False}))
        await asyncio.gather(
            stream(
                actor(SlackAdapter(slack.token, api_url=slack.url), "C1"),
                [*deltas(answer, 8), Finish("completed", text=answer)],
                pause=0.08,
            ),
            stream(
                actor(DiscordAdapter(discord.token, api_url=discord.url), "D1"),
                [*deltas(answer, 8), Finish("completed", text=answer)],
                pause=0.08,
            ),
        )
    assert slack.texts("C1") == [render(answer, TextFormat.SLACK_MRKDWN)]
    assert discord.texts("D1") == [render(answer, TextFormat.DISCORD_MARKDOWN)]
    for fake, chat, limited_after in ((slack, "C1", 1.0), (discord, "D1", 0.7)):
        calls = fake.calls_to(chat)
        hit = next(c for c in calls if c.status == 429)
        later = [c for c in calls if c.at > hit.at]
        assert later and later[0].at - hit.at >= limited_after - 0.05


async def test_a_client_gone_before_its_body_is_no_call_and_no_server_error():
    # A client whose timeout ends while its body is on the wire: the platform never saw the call.
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[method-assign]
    async with FakeTelegram() as tg:
        logging.getLogger("uvicorn.error").addHandler(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", tg.port)
        writer.write(
            f"POST /bot{tg.token}/sendMessage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            'Content-Length: 100\r\n\r\n{"chat_id":'.encode()
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.2)
        logging.getLogger("uvicorn.error").removeHandler(handler)
        assert tg.calls == []
        assert errors == []
