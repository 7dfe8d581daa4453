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

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from agentstream_delivery.render import CURSOR

WITHHELD = "[message withheld: the security filter failed]"

# Well-known credential shapes. Every pattern is linear (no nested quantifiers). A pattern with a
# group named `secret` masks only that group (`password: hunter22` keeps its label).
BUILTIN_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    r"\bsk-(?:proj-|ant-|live-)?[A-Za-z0-9_\-]{16,}",          # OpenAI / Anthropic style
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",          # Stripe
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",                            # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",                        # Slack
    r"\bAKIA[0-9A-Z]{16}\b",                                    # AWS access key id
    r"\bAIza[0-9A-Za-z_\-]{35}",                                # Google API key
    r"\b\d{8,10}:AA[A-Za-z0-9_\-]{30,}",                        # Telegram bot token
    r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*",
    r"(?i)\b(?:api[_-]?key|secret|password|passwd|token)[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"']{8,})",
)
# Beginnings of the shapes above: a trailing token starting like this may be a secret in the making.
SECRET_PREFIXES: tuple[str, ...] = (
    "sk-", "sk_", "rk_", "pk_live", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xoxa-", "xoxb-",
    "xoxp-", "xoxo-", "xoxs-", "xoxr-", "AKIA", "AIza", "eyJ", "-----BEGIN",
)
_OPEN_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*$")
_PARTIAL_HEADER = re.compile(r"-----BEGIN(?: [A-Z0-9 ]*)?$")
_TRAILING_TOKEN = re.compile(r"[^\s`'\"()<>\[\]{},;]*$")
_MIN_ENV_SECRET = 8
_HOLD_MIN = 3  # a trailing token this long that starts a known prefix is held back


def env_secret_values(names: Iterable[str]) -> list[str]:
    """Values of the named environment variables that are long enough to be secrets."""
    values = {os.environ.get(n, "") for n in names}
    return sorted((v for v in values if len(v) >= _MIN_ENV_SECRET), key=len, reverse=True)


@dataclass
class SecurityFilter:
    mask: str = "[REDACTED]"
    extra_patterns: list[str] = field(default_factory=list)
    literals: list[str] = field(default_factory=list)  # exact secret values (from the environment)

    def __post_init__(self) -> None:
        self._patterns = [re.compile(p) for p in (*BUILTIN_PATTERNS, *self.extra_patterns)]

    def redact(self, text: str, *, final: bool) -> str:
        """The frame with every secret masked (and, for previews, a possible secret's start held back)."""
        body, cursor = (text[: -len(CURSOR)], CURSOR) if text.endswith(CURSOR) else (text, "")
        for literal in self.literals:
            body = body.replace(literal, self.mask)
        for pattern in self._patterns:
            body = pattern.sub(self._masker(pattern), body)
        body = _OPEN_KEY_BLOCK.sub(self.mask, body)  # a key whose END line has not come (or never will)
        if not final:
            body = self._hold_back_tail(body)
        return body + cursor

    def _masker(self, pattern: re.Pattern[str]) -> str | Callable[[re.Match[str]], str]:
        if "secret" not in pattern.groupindex:
            return self.mask

        def keep_label(m: re.Match[str]) -> str:
            start, end = m.span("secret")
            return m.group(0)[: start - m.start()] + self.mask + m.group(0)[end - m.start():]

        return keep_label

    def _hold_back_tail(self, body: str) -> str:
        body = _PARTIAL_HEADER.sub("", body)
        match = _TRAILING_TOKEN.search(body)
        token = match.group(0) if match else ""
        if token and token != self.mask and self._could_be_secret(token):
            return body[: len(body) - len(token)]
        return body

    def _could_be_secret(self, token: str) -> bool:
        for prefix in SECRET_PREFIXES:
            if token.startswith(prefix) or (len(token) >= _HOLD_MIN and prefix.startswith(token)):
                return True
        return any(len(token) >= 4 and lit.startswith(token) for lit in self.literals)


def fail_closed(text: str, mask: str = "[REDACTED]") -> str:
    """Coarse redaction that cannot fail on ordinary text: long tokens and key blocks masked."""
    try:
        text = _OPEN_KEY_BLOCK.sub(mask, text)
        return re.sub(r"\S{16,}", mask, text)
    except Exception:
        return WITHHELD
