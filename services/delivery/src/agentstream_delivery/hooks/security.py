"""The `security` transform: secrets never leave delivery, not even in a preview.

Redaction always runs on the whole frame (the text of one platform message so far),
never on a delta: a key streamed in pieces is whole in the frame that completes it.
A preview frame may end in the *middle* of a secret — `sk-proj-AbC` before the rest
arrives — so on non-final frames a trailing token that could be the start of a secret
is held back (cut from the preview, not masked: it may turn out harmless and then
appears in the next frame). An opened private-key block is masked to the end of the
text until its END line arrives.

Fail closed: when the filter itself raises or overruns its budget, the frame goes out
through `fail_closed` — every token of 16+ non-space characters and every key block
masked — because a lossy frame is better than a leaked key or a frozen stream; if even
that fails, the frame is replaced by `WITHHELD`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentstream.redaction import (
    BUILTIN_PATTERNS,
    DEFAULT_MASK,
    OPEN_KEY_BLOCK,
    SECRET_PREFIXES,
    Redactor,
    env_secret_values,
)
from agentstream_delivery.render import CURSOR

__all__ = ["BUILTIN_PATTERNS", "SECRET_PREFIXES", "WITHHELD", "SecurityFilter", "env_secret_values", "fail_closed"]

WITHHELD = "[message withheld: the security filter failed]"

_PARTIAL_HEADER = re.compile(r"-----BEGIN(?: [A-Z0-9 ]*)?$")
_TRAILING_TOKEN = re.compile(r"[^\s`'\"()<>\[\]{},;]*$")
_HOLD_MIN = 3  # a trailing token this long that starts a known prefix is held back


@dataclass
class SecurityFilter:
    """The shared whole-text `Redactor` (agentstream.redaction), made safe for streamed previews."""

    redactor: Redactor = field(default_factory=Redactor)

    def redact(self, text: str, *, final: bool) -> str:
        """The frame with every secret masked (and, for previews, a possible secret's start held back)."""
        body, cursor = (text[: -len(CURSOR)], CURSOR) if text.endswith(CURSOR) else (text, "")
        body = self.redactor.redact(body)
        if not final:
            body = self._hold_back_tail(body)
        return body + cursor

    def _hold_back_tail(self, body: str) -> str:
        body = _PARTIAL_HEADER.sub("", body)
        match = _TRAILING_TOKEN.search(body)
        token = match.group(0) if match else ""
        if token and token != self.redactor.mask and self._could_be_secret(token):
            return body[: len(body) - len(token)]
        return body

    def _could_be_secret(self, token: str) -> bool:
        for prefix in SECRET_PREFIXES:
            if token.startswith(prefix) or (len(token) >= _HOLD_MIN and prefix.startswith(token)):
                return True
        return any(len(token) >= 4 and lit.startswith(token) for lit in self.redactor.literals)


def fail_closed(text: str, mask: str = DEFAULT_MASK) -> str:
    """Coarse redaction that cannot fail on ordinary text: long tokens and key blocks masked."""
    try:
        text = OPEN_KEY_BLOCK.sub(mask, text)
        return re.sub(r"\S{16,}", mask, text)
    except Exception:
        return WITHHELD
