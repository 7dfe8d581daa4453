"""`web-frames` topic. Key: the web chat id.

What the web chat page shows, one record per message frame: delivery's web adapter produces
them, and every delivery replica reads them all (no consumer group) to serve the pages
connected to it, so any replica serves any chat. Each frame carries the message's whole text:
a page replaces, never appends, so a missed frame is healed by the next.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, TypeAdapter

from agentstream.contracts.base import Record
from agentstream.contracts.inbound import ChatId
from agentstream.contracts.limits import Subject


class WebFrameOp(StrEnum):
    SEND = "send"  # a new message
    EDIT = "edit"  # a new text for a message sent earlier


class WebFrameKind(StrEnum):
    TEXT = "text"  # the answer (or a notice)
    TOOL = "tool"  # the run's tool progress line


class WebEnding(StrEnum):
    """How the run ended, when this frame carries its ending's words (docs/delivery.md)."""

    STOPPED = "stopped"  # someone stopped it
    PAUSED = "paused"  # the assistant was restarted before finishing
    FAILED = "failed"  # it failed or was cut off
    RESUMED = "resumed"  # cut off here; the answer was resumed below


class WebFrame(Record):
    """One message frame of a web chat."""

    type: Literal["web.frame"] = "web.frame"
    chat_id: ChatId
    tenant_id: Subject | None = Field(
        default=None, description="The chat's tenant (none: `default`): only its sessions see the frame."
    )
    message_id: str = Field(min_length=1, max_length=128, description="Unique across delivery replicas.")
    run_id: str | None = Field(default=None, description="The root run the message belongs to.")
    op: WebFrameOp
    text: str = Field(description="The message's whole text so far (a preview ends with the cursor ` ▉`).")
    markup: str = Field(default="plain", description="What `text` is written in: `plain`, or `html` (sanitised).")
    final: bool = Field(description="No later frame of this message follows.")
    kind: WebFrameKind = WebFrameKind.TEXT
    ending: WebEnding | None = None


WebFrameAdapter: TypeAdapter[WebFrame] = TypeAdapter(WebFrame)
