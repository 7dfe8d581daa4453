"""The web adapter: frames per chat, late subscribers catch up, close ends every stream."""

from __future__ import annotations

import asyncio
import json

import pytest
import structlog

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import AdapterError
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta

A = ReplyTarget(platform="web", chat_id="a")
B = ReplyTarget(platform="web", chat_id="b")


def decode(chunk: bytes) -> dict[str, object] | None:
    text = chunk.decode()
    return json.loads(text[len("data: ") :]) if text.startswith("data: ") else None


async def test_frames_stream_per_chat_and_late_pages_catch_up() -> None:
    web = WebAdapter()
    mid = await web.send(A, "Hel ▉")
    stream = web.frames("a")
    assert await anext(stream) == b": connected\n\n"
    assert decode(await anext(stream)) == {
        "message_id": mid,
        "text": "Hel ▉",
        "final": False,
        "op": "send",
        "markup": "plain",
    }
    await web.send(B, "other chat")
    await web.edit(A, mid, "Hello!", final=True)
    assert decode(await anext(stream)) == {
        "message_id": mid,
        "text": "Hello!",
        "final": True,
        "op": "edit",
        "markup": "plain",
    }
    await web.close()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert [m.text for m in web.messages("b")] == ["other chat"]


async def test_edit_of_unknown_message_fails() -> None:
    with pytest.raises(AdapterError):
        await WebAdapter().edit(A, "nope", "x")


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
