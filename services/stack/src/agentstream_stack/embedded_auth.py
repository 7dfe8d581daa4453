"""Credentials of the embedded stack, so `agentstream up` needs no configuration.

- An admin API key (`embedded-admin`, every tenant) is made when the database has no live one;
  its token is handed back once, for `up` to print, and is stored nowhere (only its hash).
- Delivery forwards the web page's messages with a `gateway` key for platform `web`, and reads the
  page's history from persistence with a `conversations:read` key: a fresh one each start (the
  previous start's is revoked), held only in this process's environment under a generated name
  that `platforms.web.api_key_env` (`history_key_env`) points to.
- Web session tokens are signed with a secret kept in `<state dir>/web-secret` (mode 0600), so
  printed links survive a restart; without a state dir, a random one for this process.
- Tool calls are signed by the runner and verified by the executor with a secret kept in
  `<state dir>/tool-call-secret` (mode 0600), made once; without a state dir, a random one for this process.
Whatever the configuration already provides (`platforms.web.api_key_env`, `history_key_env`, `auth.web.secret_env`
with their env vars set) is used as it is.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from agentstream.auth import ALL_TENANTS, KeyStore, Scope
from agentstream.auth.web_sessions import MIN_SECRET_BYTES
from agentstream.config import Settings
from agentstream.config.delivery import PlatformSettings
from agentstream.contracts import KnownPlatform
from agentstream.db import create_engine, session_factory
from agentstream.secret_files import read_or_make
from agentstream.secrets_mask import register_secret

ADMIN_KEY_NAME = "embedded-admin"
METRICS_KEY_NAME = "embedded-metrics"
# `metrics:read` only, so `agentstream top` (and Prometheus on this host) can scrape a running `up`
# without the admin key, which is never written anywhere: made fresh each start, the previous revoked.
METRICS_TOKEN_FILE = "metrics-token"
WEB_GATEWAY_KEY_NAME = "embedded-web-gateway"
WEB_HISTORY_KEY_NAME = "embedded-web-history"
# (setting of `platforms.web`, key name, its one scope, env var kind): delivery's two web keys
WEB_KEYS = (
    ("api_key_env", WEB_GATEWAY_KEY_NAME, Scope.GATEWAY, "WEB_KEY"),
    ("history_key_env", WEB_HISTORY_KEY_NAME, Scope.CONVERSATIONS_READ, "WEB_HISTORY_KEY"),
)
WEB_SECRET_FILE = "web-secret"
TOOL_CALL_SECRET_FILE = "tool-call-secret"
WEB_PLATFORM = KnownPlatform.WEB


@dataclass
class EmbeddedCredentials:
    settings: Settings
    new_admin_key: str | None = None  # set only on the start that made it
    env_names: list[str] = field(default_factory=list)


def _env_name(kind: str) -> str:
    # A name of its own per stack: several embedded stacks may share a process (tests).
    return f"AGENTSTREAM_EMBEDDED_{kind}_{secrets.token_hex(4).upper()}"


def read_or_make_secret(path: Path) -> str:
    """The secret in `path` (web sessions, tool calls), made on first use; the file is kept at mode 0600."""
    return read_or_make(
        path,
        lambda: secrets.token_urlsafe(MIN_SECRET_BYTES),
        lambda text: len(text.encode()) >= MIN_SECRET_BYTES,
        f"secret (under {MIN_SECRET_BYTES} bytes)",
    )


def write_private(path: Path, text: str) -> None:
    """`text` into `path` at mode 0600 from its first byte (written beside it, then renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    partial.replace(path)


def read_metrics_token(state_dir: Path) -> str | None:
    """The scrape token of the `up` running with `state_dir`, if one left it there."""
    try:
        return (state_dir / METRICS_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


async def prepare_credentials(
    settings: Settings, *, admin_key: bool = False, state_dir: Path | None = None
) -> EmbeddedCredentials:
    """Make the stack's keys and secret (the database must be migrated)."""
    creds = EmbeddedCredentials(settings)
    engine = create_engine(settings.database.url)
    try:
        store = KeyStore(session_factory(engine))
        live = [k for k in await store.list() if k.active]
        if admin_key and not any(k.name == ADMIN_KEY_NAME for k in live):
            creds.new_admin_key = (await store.create(ADMIN_KEY_NAME, {Scope.ADMIN}, tenant_id=ALL_TENANTS)).token
            register_secret(creds.new_admin_key)
        web = settings.platforms.get(WEB_PLATFORM) or PlatformSettings()
        for setting, key_name, scope, kind in WEB_KEYS:
            if getattr(web, setting) and os.environ.get(getattr(web, setting)):
                continue
            for old in (k for k in live if k.name == key_name):
                await store.revoke(old.key_id)
            gateway = (WEB_PLATFORM,) if scope is Scope.GATEWAY else ()
            key = await store.create(key_name, {scope}, tenant_id=ALL_TENANTS, gateway_platforms=gateway)
            name = _env_name(kind)
            os.environ[name] = key.token
            register_secret(key.token)
            creds.env_names.append(name)
            web = web.model_copy(update={setting: name})
        creds.settings = creds.settings.model_copy(update={"platforms": {**settings.platforms, WEB_PLATFORM: web}})
        if state_dir is not None:
            for old in (k for k in live if k.name == METRICS_KEY_NAME):
                await store.revoke(old.key_id)
            metrics = await store.create(METRICS_KEY_NAME, {Scope.METRICS_READ}, tenant_id=ALL_TENANTS)
            register_secret(metrics.token)
            write_private(state_dir / METRICS_TOKEN_FILE, metrics.token)
    finally:
        await engine.dispose()
    auth = creds.settings.auth
    if not auth.web.secret():
        secret = read_or_make_secret(state_dir / WEB_SECRET_FILE) if state_dir else secrets.token_urlsafe(32)
        name = _env_name("WEB_SECRET")
        os.environ[name] = secret
        register_secret(secret)
        creds.env_names.append(name)
        web_auth = auth.web.model_copy(update={"secret_env": name})
        creds.settings = creds.settings.model_copy(update={"auth": auth.model_copy(update={"web": web_auth})})
    tools = creds.settings.tools
    if not tools.call_secret():
        secret = read_or_make_secret(state_dir / TOOL_CALL_SECRET_FILE) if state_dir else secrets.token_urlsafe(32)
        name = _env_name("TOOL_CALL_SECRET")
        os.environ[name] = secret
        register_secret(secret)
        creds.env_names.append(name)
        creds.settings = creds.settings.model_copy(update={"tools": tools.model_copy(update={"call_secret_env": name})})
    return creds


@contextmanager
def forgotten_on_exit(creds: EmbeddedCredentials) -> Iterator[EmbeddedCredentials]:
    """Take the stack's secrets out of the environment when it stops."""
    try:
        yield creds
    finally:
        for name in creds.env_names:
            os.environ.pop(name, None)
