"""The stream state machine of one (root run, target): no I/O.

`transition(model, input, now)` returns the next model (`stream_model.py`) and the platform
operations to carry out (`Send`/`Edit`, numbered by the run's platform message index).
Time comes in as `now`, so cadence is testable with a fake clock; the caller owns the
clock, the timer (`model.flush_at`) and the adapter calls.

States and transitions (anything not listed leaves the model unchanged):

    IDLE        nothing of the current segment on the platform yet
      text          → IDLE        while fewer than 4 visible chars (or the platform cannot edit)
      text          → PREVIEWING  Send(frame + cursor)
      tool          → IDLE        the tool is remembered for the progress line
      break         → SEALED      Send(final text) if any is pending; the tool line below it
    PREVIEWING  a platform message is open and edited with a cursor
      text, tick    → PREVIEWING  Edit(frame + cursor) at most once per edit_interval (earlier once
                                  buffer_threshold new chars wait), never a frame that renders
                                  to what the message shows;
                                  past the safe length the head is finalized and a new message opened
      break         → SEALED      Edit(final text, no cursor); the tool line below it
    SEALED      the last text message was finalized at a segment break
      text          → SEALED | PREVIEWING   as IDLE, on a new platform message
      tool          → SEALED      the tool line is updated
      tool ended    → any         Edit(tool line with the tool's ✓/✗) where `marks_tool_ends` (the web)
    DEGRADED    rate-limit strikes: no previews any more; texts are sent final, split by length
      text          → DEGRADED    full heads past the safe length are sent
      break         → DEGRADED    the missing tail of the segment is sent
    any live state:
      degrade       → DEGRADED    the open preview is left as shown; its missing tail comes at the end
      finish        → DELIVERED | INTERRUPTED | FAILED; a run that did not complete ends visibly
                                  (`render.Ending`): its words appended to the last message that
                                  showed text (the final send on a platform that cannot edit), else a
                                  message of their own; `on_resume` remembers how to re-mark it
    DELIVERED, INTERRUPTED, FAILED are terminal: every input is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from agentstream.config import ToolProgress
from agentstream.contracts import RunStatus
from agentstream_delivery.platform_ops import Edit, Op, OpRole, Send
from agentstream_delivery.render import (
    CURSOR,
    FIRST_SEND_MIN_CHARS,
    Ending,
    visible_chars,
)
from agentstream_delivery.splitting import cut, fits, open_fence
from agentstream_delivery.stream_inputs import (
    Break,
    Degrade,
    Finish,
    StreamInput,
    TextCompleted,
    TextDelta,
    Tick,
    ToolEnded,
    ToolStarted,
)
from agentstream_delivery.stream_model import END_STATE, Segment, StreamModel, StreamState

Step = tuple[StreamModel, list[Op]]


def transition(model: StreamModel, inp: StreamInput, now: float) -> Step:
    handler = _TABLE.get((model.state, type(inp)))
    if handler is None:
        return model, []
    return handler(model, inp, now)


# -- the shared step: put the current text on the platform ---------------------------
def _put(model: StreamModel, text: str, final: bool, role: OpRole = "text") -> Op:
    return Edit(model.msg, text, final, role) if model.frame is not None else Send(model.msg, text, final, role)


def _split_heads(model: StreamModel, final: bool) -> Step:
    """Finalize every full head past the safe length; each opens the next platform message."""
    ops: list[Op] = []
    measure = model.capabilities.length()
    while (c := cut(model.body(final=final), model.safe_length, measure)) is not None:
        ops.append(_put(model, c.head, final=True))
        model = replace(
            model,
            msg=model.msg + 1,
            base=model.base + c.consumed - len(model.carry),
            carry=c.carry,
            frame=None,
            shown=0,
            sealed=(model.msg, c.head),
            sent_at=None,
            flush_at=None,
        )
    return model, ops


def _sync(model: StreamModel, now: float) -> Step:
    """Text changed or the timer fired: splits, then the first frame or a due edit."""
    if model.live_preview and model.frame is not None and model.sent_at is not None:
        due = model.sent_at + model.capabilities.edit_interval
        pending = model.body(final=False)
        if now < due and len(pending) - model.shown < model.capabilities.buffer_threshold:
            # No frame goes out yet: the length check and the rendering wait for the one that will. Back to
            # what is shown (give or take trailing blank lines, how a stream's frames come to render alike),
            # nothing is due at all; any other frame that renders as shown is dropped when due.
            return replace(model, flush_at=None if model.shows_already(pending) else due), []
    if model.live_preview and model.frame is not None:
        # The frame that goes out is rendered first: its parse keeps the blocks the text has closed, so the
        # length check below counts them and bounds only the open block instead of parsing it a second time
        # (formatting's results never depend on what it kept: docs/delivery.md, "Formatting cost").
        model.render_preview(model.body(final=False) + CURSOR)
    model, ops = _split_heads(model, final=False)
    if not model.live_preview:
        return model, ops
    body = model.body(final=False)
    frame = body + CURSOR
    if model.frame is None:
        if visible_chars(body) < FIRST_SEND_MIN_CHARS:
            return model, ops
        return replace(model, state=StreamState.PREVIEWING, frame=frame, shown=len(body), sent_at=now, flush_at=None), [
            *ops,
            Send(model.msg, frame, final=False),
        ]
    if model.shows(frame):  # nothing new on the platform: the frame stands for what it shows
        return replace(model, frame=frame, shown=len(body), flush_at=None), ops
    due = (now if model.sent_at is None else model.sent_at) + model.capabilities.edit_interval
    if now < due and len(body) - model.shown < model.capabilities.buffer_threshold:
        return replace(model, flush_at=due), ops
    return replace(model, frame=frame, shown=len(body), sent_at=now, flush_at=None), [
        *ops,
        Edit(model.msg, frame, final=False),
    ]


def _fits(model: StreamModel, text: str) -> bool:
    return fits(text, model.capabilities.max_length, model.capabilities.length())


def _finalize(model: StreamModel, suffix: str = "") -> Step:
    """The segment's last text, exact and without cursor; the model moves past its message.

    `suffix` (an ending's marker) is appended when the message still fits with it.
    """
    model, ops = _split_heads(model, final=True)
    body = model.body(final=True)
    if model.frame is None and not visible_chars(body):
        return replace(model, carry="", flush_at=None), ops
    text = body + suffix if _fits(model, body + suffix) else body
    if text != model.frame:
        ops.append(_put(model, text, final=True))
    return replace(
        model,
        msg=model.msg + 1,
        base=0,
        carry="",
        frame=None,
        shown=0,
        sealed=(model.msg, text),
        sent_at=None,
        flush_at=None,
    ), ops


# -- handlers ----------------------------------------------------------------------
def _add_text(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, TextDelta | TextCompleted)
    if inp.message_id in model.sealed_ids:
        return model, []  # its segment is already final on the platform
    seg = (
        model.segment.append(inp.message_id, inp.text)
        if isinstance(inp, TextDelta)
        else model.segment.complete(inp.message_id, inp.text)
    )
    model = replace(model, segment=seg)
    if model.tools and visible_chars(seg.visible(final=False)):
        model = replace(model, tools=(), progress=None, ended=())  # the tool phase is over: its line stays as it is
    return _sync(model, now)


def _tick(model: StreamModel, inp: StreamInput, now: float) -> Step:
    if model.flush_at is None:
        return model, []
    return _sync(model, now)


def _seal(model: StreamModel, inp: StreamInput, now: float) -> Step:
    if model.frame is None and not visible_chars(model.body(final=True)) and not model.tools:
        return model, []  # nothing to seal: later text simply continues this segment
    sealed_ids = model.sealed_ids | {mid for mid, _ in model.segment.parts}
    model, ops = _finalize(model)
    state = model.state if model.state is StreamState.DEGRADED else StreamState.SEALED
    model = replace(model, state=state, segment=Segment(), sealed_ids=sealed_ids)
    model, progress_ops = _progress_line(model)
    return model, ops + progress_ops


def _tool(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, ToolStarted)
    mode = model.capabilities.tool_progress
    if mode == ToolProgress.OFF or not model.live_preview:
        return model, []  # a platform that cannot render progress eats it
    if mode == ToolProgress.NEW and model.tools and model.tools[-1] == inp.tool:
        return model, []
    model = replace(model, tools=(*model.tools, inp.tool))
    if model.state is not StreamState.SEALED or model.frame is not None:
        return model, []  # shown once the text before the tool call is sealed
    return _progress_line(model)


def _tool_ended(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, ToolEnded)
    if not model.capabilities.marks_tool_ends or inp.tool not in model.tools:
        return model, []  # a line without outcomes, or a tool it does not show
    model = replace(model, ended=(*model.ended, (inp.tool, inp.ok)))
    return _progress_line(model) if model.progress is not None else (model, [])


def _progress_line(model: StreamModel) -> Step:
    if not model.tools or not model.live_preview:
        return model, []
    text = model.capabilities.texts.tool_line(model.tools, dict(model.ended))
    if model.progress is None:
        return replace(model, progress=(model.msg, text), msg=model.msg + 1), [
            Send(model.msg, text, final=True, role="progress")
        ]
    index, shown = model.progress
    if shown == text:
        return model, []
    return replace(model, progress=(index, text)), [Edit(index, text, final=True, role="progress")]


def _degrade(model: StreamModel, inp: StreamInput, now: float) -> Step:
    """Leave the open preview as the platform shows it; its missing tail is sent at the end."""
    assert isinstance(inp, Degrade)
    model = replace(model, state=StreamState.DEGRADED, flush_at=None)
    if model.frame is None:
        return model, []
    if inp.shown is None:  # the preview never landed: the whole message is still missing
        return replace(model, frame=None, shown=0), []
    covered = max(0, inp.shown - len(model.carry))
    visible = model.segment.visible(final=False)
    base = model.base + covered
    lang = open_fence(model.carry + visible[model.base : base])
    carry = "" if lang is None else f"```{lang}\n"
    return replace(model, msg=model.msg + 1, base=base, carry=carry, frame=None, shown=0), []


def _finish(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, Finish)
    if inp.status is RunStatus.COMPLETED:
        if not model.segment.parts and inp.text and model.sealed is None and model.frame is None:
            model = replace(model, segment=Segment((("final", inp.text),)))  # nothing streamed: the answer itself
        model, ops = _finalize(model)
    else:
        model, ops = _end_visibly(model, model.capabilities.texts.ending(inp.status, inp.reason, inp.error))
    return replace(model, state=END_STATE[inp.status], frame=None, flush_at=None), ops


def _end_visibly(model: StreamModel, ending: Ending) -> Step:
    """The run stops short of its answer: the user sees where, and why."""
    ops: list[Op] = []
    if model.frame is not None or visible_chars(model.body(final=True)) > 0:
        model, ops = _finalize(model, ending.marker)  # the open message takes the marker
        assert model.sealed is not None
        index, text = model.sealed
        if text.endswith(ending.marker):
            return _resumable(model, Edit(index, text, final=True), ending.marker), ops
    last = _last_shown(model)
    if last is not None and not ops and model.capabilities.can_edit and _fits(model, last.text + ending.marker):
        marked = replace(last, text=last.text + ending.marker)
        return _resumable(model, marked, ending.marker), [marked]
    words = ending.follow_up if last is not None else ending.notice
    if words is None:
        return model, ops
    notice = Send(model.msg, words, final=True, role="notice")
    model = replace(model, msg=model.msg + 1)
    if last is None:  # nothing of the run was shown: the notice itself is what a resume re-marks
        return _resumable(model, Edit(notice.segment, words, final=True, role="notice"), words), [*ops, notice]
    return _resumable(model, last, ""), [*ops, notice]


def _last_shown(model: StreamModel) -> Edit | None:
    """The last message on the platform that shows the run's text or tool line, as its final edit."""
    shown: list[Edit] = []
    if model.sealed is not None:
        shown.append(Edit(model.sealed[0], model.sealed[1], final=True))
    if model.progress is not None:
        shown.append(Edit(model.progress[0], model.progress[1], final=True, role="progress"))
    return max(shown, key=lambda e: e.segment, default=None)


def _resumable(model: StreamModel, marked: Edit, marker: str) -> StreamModel:
    """How a resume re-marks the ending message (platforms that can edit): the resumed marker
    replaces the ending's words, so the partial attempt never stands unmarked above the answer."""
    if not model.capabilities.can_edit:
        return model
    texts = model.capabilities.texts
    if marked.role == "notice":
        return replace(model, on_resume=replace(marked, text=texts.resumed_notice))
    base = marked.text[: len(marked.text) - len(marker)] if marker else marked.text
    if not _fits(model, base + texts.resumed_marker):
        return model
    return replace(model, on_resume=replace(marked, text=base + texts.resumed_marker))


Handler = Callable[[StreamModel, StreamInput, float], Step]

_LIVE = (StreamState.IDLE, StreamState.PREVIEWING, StreamState.SEALED, StreamState.DEGRADED)
_TABLE: dict[tuple[StreamState, type], Handler] = {
    **{(s, TextDelta): _add_text for s in _LIVE},
    **{(s, TextCompleted): _add_text for s in _LIVE},
    **{(s, Break): _seal for s in _LIVE},
    **{(s, ToolStarted): _tool for s in _LIVE},
    **{(s, ToolEnded): _tool_ended for s in _LIVE},
    **{(s, Degrade): _degrade for s in _LIVE if s is not StreamState.DEGRADED},
    **{(s, Finish): _finish for s in _LIVE},
    (StreamState.PREVIEWING, Tick): _tick,
}
