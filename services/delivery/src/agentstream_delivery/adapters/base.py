"""What delivery needs from a chat platform: capabilities, send/edit, and classified errors.

Every adapter raises one of the `AdapterError` subclasses below, so the stream can
handle a failure by its class (wait, shorten, give up, record as unknown) without
knowing the platform.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from agentstream.bounded import BoundedMap
from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import ReplyTarget
from agentstream_delivery.delivery_metrics import CallOutcome
from agentstream_delivery.formatting import Measure, measurer
from agentstream_delivery.render import DEFAULT_TEXTS, FixedTexts
from agentstream_delivery.splitting import MEASURES, MeasureName


@dataclass(frozen=True)
class Capabilities:
    """How a platform wants to be streamed to: the adapter's defaults, `platforms.<name>` settings override them.

    The one description of a platform the stream state machine reads (docs/delivery.md).
    """

    max_length: int = 4096
    measure: MeasureName = "chars"
    can_edit: bool = True
    draft_streaming: bool = False  # Telegram sendMessageDraft in private chats
    edit_interval: float = 1.0
    buffer_threshold: int = 300
    tool_progress: ToolProgress = ToolProgress.NEW
    marks_tool_ends: bool = False  # the tool line is edited to each tool's outcome (✓/✗) when it ends
    chat_interval: float = 0.0  # minimum seconds between two calls to one chat (the platform's budget)
    formatting: TextFormat = TextFormat.MARKDOWN  # the markup the model's Markdown is rendered to
    texts: FixedTexts = DEFAULT_TEXTS  # stopped marker, tool line, endings

    def length(self) -> Measure:
        """How long a Markdown text is once rendered, as the platform counts (splitting measures with it)."""
        return measurer(MEASURES[self.measure], self.formatting)


class AdapterError(Exception):
    """A platform call failed; the subclass says how the stream should react.

    Every subclass must name its `kind` (`class NotFound(AdapterError, kind=...)`): the call's outcome
    label in the metrics and the prefix of the error its ledger row records.
    """

    kind: ClassVar[CallOutcome] = CallOutcome.ERROR

    def __init_subclass__(cls, *, kind: CallOutcome, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.kind = kind


class RateLimited(AdapterError, kind=CallOutcome.RATE_LIMITED):
    """The platform asks to wait `retry_after` seconds: the call is retried then.

    At the strike limit the stream degrades to final text only."""

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after}s)")
        self.retry_after = retry_after


class TooLong(AdapterError, kind=CallOutcome.TOO_LONG):
    """The text is over the platform's limit for one message: the call fails (`failed`)."""


class BadFormat(AdapterError, kind=CallOutcome.BAD_FORMAT):
    """The platform refused the call (a 4xx with no more specific class): the call fails (`failed`)."""


class FormattingRejected(BadFormat, kind=CallOutcome.FORMATTING_REJECTED):
    """The platform refused the message's markup (Telegram "can't parse entities"): send it as plain text."""


class Forbidden(AdapterError, kind=CallOutcome.FORBIDDEN):
    """The bot may not write to the chat (blocked, removed, bad token): the chat is dead for the stream."""


class NotFound(AdapterError, kind=CallOutcome.NOT_FOUND):
    """The message to edit is gone (deleted on the platform): its text is posted as a new message."""


class Transient(AdapterError, kind=CallOutcome.TRANSIENT):
    """5xx, connection reset: the call did not land; it may be retried."""


class OutcomeUnknown(AdapterError, kind=CallOutcome.UNKNOWN):
    """The request went out but no answer came back (timeout): it may have landed."""


@runtime_checkable
class PlatformAdapter(Protocol):
    platform: str
    capabilities: Capabilities
    bot: str  # the rate-limit budget is per (bot, chat)
    timeout: float | None  # the client timeout of one call (None: in-process, no call can time out)

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        """Post a new message; returns the platform message id.

        `final` says no edit of this message will follow (renderers such as the
        console use it to stop redrawing; real platforms may ignore it). `markup` is
        what `text` is written in: the adapter's `capabilities.formatting`, or plain
        text when the platform refused that.
        """
        ...

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        """Replace the text of a message sent earlier."""
        ...

    async def close(self) -> None:
        """Release what the adapter holds (live displays, HTTP clients)."""
        ...


@runtime_checkable
class DraftAdapter(Protocol):
    """Adapters that can stream a draft (Telegram `sendMessageDraft`) before the real message."""

    def supports_drafts(self, target: ReplyTarget) -> bool: ...

    async def send_draft(
        self, target: ReplyTarget, draft_id: int, text: str, *, markup: TextFormat = TextFormat.PLAIN
    ) -> None: ...


class Probe(Enum):
    """What a probe of one message id found."""

    SHOWS = "shows"  # the message shows exactly the text: left unchanged
    ABSENT = "absent"  # no message of the bot with that id (deleted, never there, or not the bot's)
    CHANGED = "changed"  # a message of the bot with another text: the probe replaced it


@runtime_checkable
class OrphanProbe(Protocol):
    """Adapters that can find a message a send of unknown outcome posted, and delete it (Telegram).

    `shows` answers whether the message `message_id` shows exactly `text` (as sent, in `markup`)
    without changing it when it does; docs/delivery.md says how Telegram's probe works and what
    it may touch."""

    async def shows(self, target: ReplyTarget, message_id: str, text: str, *, markup: TextFormat) -> Probe: ...

    def shares_ids(self, chat_id: str, other_chat_id: str) -> bool:
        """Whether the two chats' message ids come from one sequence (an id known in one is none of the other's)."""
        ...

    async def delete(self, target: ReplyTarget, message_id: str) -> None: ...


ChatT = TypeVar("ChatT")
# The key of the message a send creates, set by the deliverer around its sends: the same for a send
# repeated after an unknown outcome, so a platform with idempotent creates (Discord's `enforce_nonce`)
# returns the message the first one posted instead of a second one.
SEND_KEY: ContextVar[str | None] = ContextVar("send_key", default=None)
# The root run whose message an adapter call carries, set by the deliverer around its calls: an
# adapter that shows runs apart (the web page) reads it; the others never need it.
DELIVERING_RUN: ContextVar[str | None] = ContextVar("delivering_run", default=None)


@dataclass(frozen=True)
class ChatBounds:
    """How many chats an in-process platform remembers, and for how long one may stay idle."""

    max_chats: int = 10_000
    idle_ttl_s: float = 600.0
    clock: Callable[[], float] = time.monotonic


class InProcessAdapter(Generic[ChatT]):
    """What the in-process platforms (memory, web) share: no bot token, no call that can time out,
    and their chats kept bounded: idle ones are forgotten, never one the subclass says is in use."""

    platform: str
    bot = ""
    timeout: float | None = None

    def __init__(self, capabilities: Capabilities, bounds: ChatBounds) -> None:
        self.capabilities = capabilities
        self.bounds = bounds
        self._chats: BoundedMap[str, ChatT] = BoundedMap(
            bounds.max_chats, bounds.idle_ttl_s, self._in_use, bounds.clock
        )

    def _in_use(self, chat_id: str, chat: ChatT) -> bool:
        raise NotImplementedError
