"""Secrets never in logs: masking of configured secret values, URL tokens and our own key format.

`mask_secrets` is a structlog processor; `configure_logging` runs it on every record, our
structlog events and foreign stdlib records alike, after exceptions are formatted, so a
traceback or an error's repr is masked too. What it masks:

- every registered secret value (`register_secret`, `register_settings_secrets`: the values of
  the env vars the settings name in their `*_env` keys, and the database password);
- tokens in URLs (`mask_url`): Telegram's `/bot<id>:<token>` path, Discord and Slack webhook
  paths, credentials in `user:password@`, and query parameters named like a credential;
- `agsk_<id>_<secret>` API keys (the id stays, to tell keys apart) and `Bearer` credentials.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstream.config import Settings

MASK = "***"
MIN_SECRET_LENGTH = 6  # shorter values would mask ordinary words all over the logs

# Credentials inside URLs. The parts kept (ids, names) help an operator; the parts masked authenticate.
_URL_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(/bot\d+:)[^/?#\s'\"<>]+"), rf"\g<1>{MASK}"),  # Telegram Bot API path
    (re.compile(r"(/webhooks/\d+/)[^/?#\s'\"<>]+"), rf"\g<1>{MASK}"),  # Discord webhook
    (re.compile(r"(hooks\.slack\.com/services/[^/\s]+/[^/\s]+/)[^/?#\s'\"<>]+"), rf"\g<1>{MASK}"),
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/@:\s'\"<>]*:)[^/@\s'\"<>]+@"), rf"\g<1>{MASK}@"),  # user:pw@
    (
        re.compile(
            r"(?i)([?&;](?:[a-z0-9_.\-]*[_.\-])?"
            r"(?:token|key|apikey|secret|signature|sig|password|passwd|pwd|auth|credentials?)=)[^&#\s'\"<>]*"
        ),
        rf"\g<1>{MASK}",
    ),
)
_API_KEY = re.compile(r"\b(agsk_[A-Za-z0-9]+_)[A-Za-z0-9_\-]{16,}")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{12,}")

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_ordered: tuple[str, ...] = ()  # longest first: a secret containing another is masked whole


def register_secret(value: str | None) -> None:
    """Mask `value` in every log record from now on (ignored when shorter than MIN_SECRET_LENGTH)."""
    register_secrets([value] if value else [])


def register_secrets(values: Iterable[str | None]) -> None:
    global _secrets, _ordered
    new = {v for v in values if v and len(v) >= MIN_SECRET_LENGTH}
    with _lock:
        if new <= _secrets:
            return
        _secrets = _secrets | new
        _ordered = tuple(sorted(_secrets, key=len, reverse=True))


def forget_secrets() -> None:
    """Drop every registered value (tests)."""
    global _secrets, _ordered
    with _lock:
        _secrets, _ordered = frozenset(), ()


def registered_secrets() -> tuple[str, ...]:
    return _ordered


def settings_secrets(settings: Settings) -> list[str]:
    """The secret values `settings` configures: env vars named by `*_env` keys, the database password."""
    from sqlalchemy.engine import make_url

    from agentstream.redaction import secret_env_names

    values = [os.environ.get(name) or "" for name in secret_env_names(settings)]
    with contextlib.suppress(Exception):  # an unparsable URL fails at connect time with its own error
        values.append(make_url(settings.database.url).password or "")
    return [v for v in values if len(v) >= MIN_SECRET_LENGTH]


def register_settings_secrets(settings: Settings) -> None:
    register_secrets(settings_secrets(settings))


def mask_url(text: str) -> str:
    """`text` (a URL, or text containing URLs) with the credentials in its URLs masked."""
    for pattern, replacement in _URL_RULES:
        text = pattern.sub(replacement, text)
    return text


def mask_text(text: str) -> str:
    """Every registered secret, URL credential, API key and bearer token in `text` masked."""
    text = mask_url(text)  # first: it keeps the non-secret parts (a Telegram bot id) a literal would swallow
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _API_KEY.sub(rf"\g<1>{MASK}", text)
    return _BEARER.sub(rf"\g<1>{MASK}", text)


def _mask_value(value: Any) -> Any:
    if isinstance(value, str):
        return mask_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: _mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_mask_value(v) for v in value]
    # Anything else is rendered by its repr (as the JSON renderer would): mask that text.
    return mask_text(repr(value))


def mask_secrets(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: every value of the event (nested, exception text included) masked."""
    for key, value in event_dict.items():
        event_dict[key] = _mask_value(value)
    return event_dict
