"""What the stream state machine's tests share: a model of a platform without limits that matter, fed at set times."""

from __future__ import annotations

from agentstream.config import ToolProgress
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.platform_ops import Send
from agentstream_delivery.stream_inputs import TextDelta
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel, StreamState

CURSOR = " ▉"
INTERVAL = 1.0
# No tool line and no length splits unless a test asks for them.
STREAMED = {"max_length": 1_000_000, "tool_progress": ToolProgress.OFF, "edit_interval": INTERVAL}


def model(**kw: object) -> StreamModel:
    return StreamModel(Capabilities(**{**STREAMED, **kw}))  # type: ignore[arg-type]


def feed(m: StreamModel, *steps: tuple[float, object]) -> tuple[StreamModel, list[object]]:
    """Each input at its time; the model after them and every op they asked for."""
    ops: list[object] = []
    for now, inp in steps:
        m, out = transition(m, inp, now)  # type: ignore[arg-type]
        ops.extend(out)
    return m, ops


def previewing(text: str = "Hello", at: float = 0.0) -> StreamModel:
    """A stream showing `text` with the cursor: its first message sent, edits to come."""
    m, ops = feed(model(), (at, TextDelta("m1", text)))
    assert m.state is StreamState.PREVIEWING and ops == [Send(0, text + CURSOR, final=False)]
    return m
