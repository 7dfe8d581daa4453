"""What delivery needs from a chat platform: capabilities plus send and edit."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentstream.contracts import ReplyTarget


class AdapterError(Exception):
    """A platform call failed; the stream logs it and carries on."""


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
