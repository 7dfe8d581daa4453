"""What delivery needs from a chat platform: capabilities, send/edit, and classified errors.

Every adapter raises one of the `AdapterError` subclasses below, so the stream can
handle a failure by its class (wait, shorten, give up, record as unknown) without
knowing the platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from agentstream.config import ToolProgress
from agentstream.contracts import ReplyTarget

MeasureName = Literal["chars", "utf16"]


@dataclass(frozen=True)
class Capabilities:
    max_length: int = 4096
    measure: MeasureName = "chars"
    can_edit: bool = True
    draft_streaming: bool = False  # Telegram sendMessageDraft in private chats
    requires_final_edit: bool = False
    native_stream: bool = False
    edit_interval: float = 1.0
    buffer_threshold: int = 300
    tool_progress: ToolProgress = ToolProgress.NEW
    chat_interval: float = 0.0  # minimum seconds between two calls to one chat (the platform's budget)


class AdapterError(Exception):
    """A platform call failed; the subclass says how the stream should react."""

    kind = "error"


class RateLimited(AdapterError):
    kind = "rate_limited"

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after}s)")
        self.retry_after = retry_after


class TooLong(AdapterError):
    kind = "too_long"


class BadFormat(AdapterError):
    kind = "bad_format"


class Forbidden(AdapterError):
    kind = "forbidden"


class NotFound(AdapterError):
    kind = "not_found"


class Transient(AdapterError):
    """5xx, connection reset: the call did not land; it may be retried."""

    kind = "transient"


class OutcomeUnknown(AdapterError):
    """The request went out but no answer came back (timeout): it may have landed."""

    kind = "unknown"


@runtime_checkable
class PlatformAdapter(Protocol):
    platform: str
    can_edit: bool
    max_length: int
    edit_interval: float  # seconds between edits of one message (settings may override)

    async def send(self, target: ReplyTarget, text: str, *, final: bool = False) -> str:
        """Post a new message; returns the platform message id.

        `final` says no edit of this message will follow (renderers such as the
        console use it to stop redrawing; real platforms may ignore it).
        """
        ...

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, final: bool = False) -> None:
        """Replace the text of a message sent earlier."""
        ...

    async def close(self) -> None:
        """Release what the adapter holds (live displays, HTTP clients)."""
        ...


@runtime_checkable
class DraftAdapter(Protocol):
    """Adapters that can stream a draft (Telegram `sendMessageDraft`) before the real message."""

    def supports_drafts(self, target: ReplyTarget) -> bool: ...

    async def send_draft(self, target: ReplyTarget, draft_id: int, text: str) -> None: ...


def capabilities_of(adapter: PlatformAdapter) -> Capabilities:
    """The adapter's declared capabilities; adapters without the attribute get them from their fields."""
    caps = getattr(adapter, "capabilities", None)
    if isinstance(caps, Capabilities):
        return caps
    return Capabilities(
        max_length=adapter.max_length,
        can_edit=adapter.can_edit,
        edit_interval=adapter.edit_interval,
        tool_progress=ToolProgress.OFF,
    )
