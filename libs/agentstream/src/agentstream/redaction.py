"""Secrets masked out of whole texts: the patterns delivery's security hook shows and persistence stores.

Pure functions and data, no I/O except reading the environment: delivery wraps `Redactor`
with what only streaming needs (cursor, held-back tails); persistence applies it to the
rows of a finished run (`hooks.security.redact_storage`), so what is stored is what was shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstream.config import Settings

DEFAULT_MASK = "[REDACTED]"

# Well-known credential shapes. Every pattern is linear (no nested quantifiers). A pattern with a
# group named `secret` masks only that group (`password: hunter22` keeps its label).
BUILTIN_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    r"\bsk-(?:proj-|ant-|live-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic style
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"\b\d{8,10}:AA[A-Za-z0-9_\-]{30,}",  # Telegram bot token
    r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*",
    r"(?i)\b(?:api[_-]?key|secret|password|passwd|token)[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"']{8,})",
)
# Beginnings of the shapes above: a trailing token starting like this may be a secret in the making.
SECRET_PREFIXES: tuple[str, ...] = (
    "sk-",
    "sk_",
    "rk_",
    "pk_live",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "AKIA",
    "AIza",
    "eyJ",
    "-----BEGIN",
)
OPEN_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*$")
MIN_ENV_SECRET = 8  # shorter env values are not treated as secrets (too likely to be ordinary words)


def secret_env_names(settings: Settings) -> list[str]:
    """Every env var the settings point at (`*_env` keys anywhere, `hooks.security.env`): their values are secrets."""
    names: list[str] = []

    def walk(value: Any, key: str = "", named: bool = False) -> None:
        named = named or key.endswith("_env")  # every name under a `*_env` key (`headers_env: {h: VAR}`)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k), named)
        elif isinstance(value, list):
            for v in value:
                walk(v, key, named)
        elif isinstance(value, str) and named:
            names.append(value)

    walk(settings.model_dump(mode="python"))
    return [*names, *settings.hooks.security.env]


def env_secret_values(names: Iterable[str], min_length: int = MIN_ENV_SECRET) -> list[str]:
    """Values of the named environment variables that are long enough to be secrets, longest first."""
    values = {os.environ.get(n, "") for n in names}
    return sorted((v for v in values if len(v) >= min_length), key=len, reverse=True)


@dataclass
class Redactor:
    """Masks every known secret shape, configured pattern and literal value in a whole text."""

    mask: str = DEFAULT_MASK
    extra_patterns: list[str] = field(default_factory=list)
    literals: list[str] = field(default_factory=list)  # exact secret values (from the environment)

    def __post_init__(self) -> None:
        self._patterns = [re.compile(p) for p in (*BUILTIN_PATTERNS, *self.extra_patterns)]

    def redact(self, text: str) -> str:
        for literal in self.literals:
            text = text.replace(literal, self.mask)
        for pattern in self._patterns:
            text = pattern.sub(self._masker(pattern), text)
        return OPEN_KEY_BLOCK.sub(self.mask, text)  # a key whose END line has not come (or never will)

    def _masker(self, pattern: re.Pattern[str]) -> str | Callable[[re.Match[str]], str]:
        if "secret" not in pattern.groupindex:
            return self.mask

        def keep_label(m: re.Match[str]) -> str:
            start, end = m.span("secret")
            return m.group(0)[: start - m.start()] + self.mask + m.group(0)[end - m.start() :]

        return keep_label


def redactor_for(settings: Settings) -> Redactor | None:
    """The redactor `hooks.security` configures, or None when the security hook is off."""
    sec = settings.hooks.security
    if not sec.enabled:
        return None
    literals = env_secret_values(secret_env_names(settings)) if sec.redact_env else []
    return Redactor(mask=sec.mask, extra_patterns=list(sec.patterns), literals=literals)


def storage_redactor(settings: Settings) -> Redactor | None:
    """What persistence applies before writing text: the security hook's redactor unless `redact_storage` is off."""
    return redactor_for(settings) if settings.hooks.security.redact_storage else None


_DEFAULT = Redactor()


def redact(text: str, mask: str = DEFAULT_MASK) -> str:
    """`text` with the built-in secret shapes masked (no configured patterns or literals)."""
    return _DEFAULT.redact(text) if mask == DEFAULT_MASK else Redactor(mask=mask).redact(text)
