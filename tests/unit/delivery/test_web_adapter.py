"""The web adapter: frames per chat with ids, late pages catch up, Last-Event-ID resumes, close ends streams."""

from __future__ import annotations

import asyncio
import json

import pytest
import structlog
from aiokafka.errors import KafkaTimeoutError

from agentstream.config import PlatformTexts
from agentstream.contracts import ReplyTarget, WebEnding, WebFrame
from agentstream_delivery.adapters.base import DELIVERING_RUN, Transient
from agentstream_delivery.adapters.web import FrameId, WebAdapter
from agentstream_delivery.adapters.web_endings import ending_of, visible_text
from agentstream_delivery.render import (
    ENDING_TEXTS,
    RESUMED_NOTICE,
    FixedTexts,
    failure_text,
    stopped_frame,
    tool_line,
)
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta

A = ReplyTarget(platform="web", chat_id="a")
B = ReplyTarget(platform="web", chat_id="b")


def decode(chunk: bytes) -> tuple[str, dict[str, object]]:
    lines = dict(line.split(": ", 1) for line in chunk.decode().strip().split("\n"))
    return lines["id"], json.loads(lines["data"])


async def test_frames_stream_per_chat_and_late_pages_catch_up() -> None:
    web = WebAdapter()
    token = DELIVERING_RUN.set("run-1")
    try:
        mid = await web.send(A, "Hel ▉")
    finally:
        DELIVERING_RUN.reset(token)
    stream = web.frames("a")
    assert (await anext(stream)).endswith(b": connected\n\n")
    first_id, first = decode(await anext(stream))
    assert first == {
        "message_id": mid,
        "run_id": "run-1",
        "op": "send",
        "text": "Hel ▉",
        "markup": "plain",
        "final": False,
        "kind": "text",
        "ending": None,
    }
    await web.send(B, "other chat")
    await web.edit(A, mid, "Hello!", final=True)
    second_id, second = decode(await anext(stream))
    assert (second["text"], second["final"], second["op"]) == ("Hello!", True, "edit")
    assert FrameId.parse(second_id) > FrameId.parse(first_id)  # type: ignore[operator]
    await web.close()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert [m.text for m in web.messages("b")] == ["other chat"]


async def test_last_event_id_resumes_with_only_what_the_page_lacks() -> None:
    web = WebAdapter()
    one = await web.send(A, "one", final=True)
    two = await web.send(A, "two ▉")
    stream = web.frames("a")
    await anext(stream)
    seen = [decode(await anext(stream)) for _ in range(2)]
    await stream.aclose()
    last_id = seen[-1][0]
    await web.edit(A, two, "two, done", final=True)
    resumed = web.frames("a", FrameId.parse(last_id))
    await anext(resumed)
    frame_id, frame = decode(await anext(resumed))
    assert (frame["message_id"], frame["text"]) == (two, "two, done")  # `one` is not sent again
    assert one not in {f["message_id"] for _, f in seen[1:]}
    await resumed.aclose()


async def test_a_sink_receives_the_frames_and_nothing_shows_until_received() -> None:
    sent: list[WebFrame] = []

    async def sink(frame: WebFrame) -> None:
        sent.append(frame)

    web = WebAdapter(sink=sink)
    mid = await web.send(A, tool_line(("search",)))
    await web.edit(A, mid, stopped_frame("partial"), final=True)
    assert web.messages("a") == []  # pages are served from what the reader receives, not from sends
    assert [(f.chat_id, f.kind, f.ending) for f in sent] == [("a", "tool", None), ("a", "text", "stopped")]
    web.receive(FrameId(3, 41), sent[1])
    assert [m.text for m in web.messages("a")] == ["partial ⏹ stopped"]


async def test_a_frame_the_broker_did_not_take_is_a_transient_error() -> None:
    async def refusing(frame: WebFrame) -> None:
        raise KafkaTimeoutError()

    with pytest.raises(Transient):
        await WebAdapter(sink=refusing).send(A, "hello", final=True)


def test_endings_are_read_from_the_fixed_texts() -> None:
    assert ending_of(stopped_frame("answer")) is WebEnding.STOPPED
    assert ending_of("answer\n\n" + failure_text("boom")) is WebEnding.FAILED
    assert {ending_of("answer\n\n" + t) for t in ENDING_TEXTS.values()} == {WebEnding.FAILED, WebEnding.PAUSED}
    assert ending_of(RESUMED_NOTICE) is WebEnding.RESUMED
    assert ending_of("just an answer") is None


def test_frame_ids_parse_and_order() -> None:
    assert FrameId.parse("2-17") == FrameId(2, 17)
    assert FrameId.parse("garbage") is None and FrameId.parse(None) is None
    assert FrameId(2, 18).follows(FrameId(2, 17)) and not FrameId(2, 17).follows(FrameId(2, 17))
    assert FrameId(1, 0).follows(FrameId(2, 17))  # another partition: the page may lack it


async def test_heartbeat_keeps_an_idle_stream_open() -> None:
    web = WebAdapter()
    stream = web.frames("a", heartbeat_s=0.01)
    await anext(stream)
    assert await asyncio.wait_for(anext(stream), 1) == b": keep-alive\n\n"
    await stream.aclose()


async def test_a_streamed_answer_reaches_the_page_as_sanitised_html() -> None:
    web = WebAdapter(edit_interval=0.01)
    a = StreamActor(StreamKey.of("r1", A), A, web, structlog.get_logger("test"))
    a.start()
    answer = "**Hi** <img src=x onerror=alert(1)> [x](javascript:alert(1)) and [ok](https://example.com)"
    for i in range(0, len(answer), 12):
        a.feed(TextDelta("m1", answer[i : i + 12]))
        await asyncio.sleep(0.02)
    a.feed(Finish("completed", text=answer))
    assert a.task is not None
    await asyncio.wait_for(a.task, 5)
    [frame] = web.messages("a")
    assert frame.markup == "html" and frame.final
    assert frame.text == (
        "<p><strong>Hi</strong> &lt;img src=x onerror=alert(1)&gt; [x](javascript:alert(1)) and "
        '<a href="https://example.com" rel="noopener noreferrer" target="_blank">ok</a></p>'
    )


def test_html_frames_are_recognised_by_what_they_show() -> None:
    html = "<p>answer <strong>so far</strong></p>\n<p>⚠️ The answer ended unexpectedly.</p>"
    assert visible_text(html) == "answer so far\n⚠️ The answer ended unexpectedly."
    assert ending_of(visible_text(html)) is WebEnding.FAILED
    assert ending_of(visible_text("<p>an answer &lt;b&gt; ⏹ stopped</p>")) is WebEnding.STOPPED
    assert ending_of(visible_text("<p>an answer</p>")) is None


def test_the_web_pages_endings_are_read_in_the_texts_it_is_configured_with() -> None:
    texts = FixedTexts.of(PlatformTexts(stopped="⏹ angehalten", shutdown="⏸ Neu gestartet.", failure_prefix="Fehler: "))
    assert ending_of("Antwort ⏹ angehalten", texts) is WebEnding.STOPPED
    assert ending_of("Antwort\n\n⏸ Neu gestartet.", texts) is WebEnding.PAUSED
    assert ending_of("Antwort\n\nFehler: boom", texts) is WebEnding.FAILED
    assert ending_of(stopped_frame("answer"), texts) is None  # the default words are not this page's


async def test_a_chat_id_of_two_tenants_is_two_chats() -> None:
    """Chat ids are the gateway's: acme's `alice` and beta's `alice` never see each other's frames."""
    web = WebAdapter()
    acme, beta = (ReplyTarget(platform="web", chat_id="alice", tenant_id=t) for t in ("acme", "beta"))
    await web.send(acme, "for acme")
    beta_page = web.frames("alice", tenant_id="beta")
    assert (await anext(beta_page)).endswith(b": connected\n\n")  # no backlog of acme's
    await web.send(acme, "acme again")
    await web.send(beta, "for beta")
    _, frame = decode(await anext(beta_page))
    assert frame["text"] == "for beta"
    await web.close()
    assert [m.text for m in web.messages("alice", "acme")] == ["for acme", "acme again"]
    assert [m.text for m in web.messages("alice", "beta")] == ["for beta"]
    assert web.messages("alice") == []  # the default tenant's alice is a third chat
