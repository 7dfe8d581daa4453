"""`agentstream keys create|list|revoke`: the API keys every HTTP route asks for.

A key is shown once, when it is created; the database keeps only its hash. Keys are read from
the database named by `database.url`, so these commands run where that database is reachable.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from agentstream.auth import ALL_TENANTS, DEFAULT_TENANT, KeyStore, NewKey, Scope
from agentstream.auth.keys import KeyInfo
from agentstream.config import Settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_stack.cli_support import ConfigOpt, err, load_or_exit, out

T = TypeVar("T")
keys_app = typer.Typer(no_args_is_help=True, add_completion=False)  # its help: the root's COMMANDS
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


async def _with_store(settings: Settings, use: Callable[[KeyStore], Awaitable[T]]) -> T:
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        return await use(KeyStore(session_factory(engine)))
    finally:
        await engine.dispose()


def _describe(key_id: str, name: str, p: KeyInfo | NewKey) -> dict[str, object]:
    principal = p.principal
    doc: dict[str, object] = {
        "key_id": key_id,
        "name": name,
        "tenant": principal.tenant_id,
        "scopes": sorted(s.value for s in principal.scopes),
        "platform": principal.platform,
        "user_id": principal.user_id,
        "gateway_platforms": list(principal.gateway_platforms),
        "profiles": list(principal.profiles),
    }
    if isinstance(p, KeyInfo):
        doc.update(
            created_at=p.created_at.isoformat(),
            expires_at=p.expires_at.isoformat() if p.expires_at else None,
            revoked_at=p.revoked_at.isoformat() if p.revoked_at else None,
        )
    return doc


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Option(help="What the key is for (shown by `keys list`).")],
    scope: Annotated[list[Scope], typer.Option("--scope", "-s", help="A scope; repeat for several.")],
    tenant: Annotated[
        str, typer.Option(help=f"The key's tenant; {ALL_TENANTS!r} for every tenant (operators).")
    ] = DEFAULT_TENANT,
    platform: Annotated[str | None, typer.Option(help="Pin the end user's platform (with --user).")] = None,
    user: Annotated[str | None, typer.Option(help="Pin the end user's id (with --platform).")] = None,
    gateway_platform: Annotated[
        list[str] | None,
        typer.Option(
            "--gateway-platform", help="With the gateway scope: a platform whose users it may speak for; repeat."
        ),
    ] = None,
    profile: Annotated[
        list[str] | None, typer.Option("--profile", help="A profile the key may choose in POST /v1/messages; repeat.")
    ] = None,
    expires_in_days: Annotated[float | None, typer.Option(help="Expire after this many days.")] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Create a key and print it (the only time it is shown)."""
    settings = load_or_exit(config)
    if (platform is None) != (user is None):
        err.print("[red]--platform and --user go together[/]")
        raise typer.Exit(2)
    if gateway_platform and Scope.GATEWAY not in scope:
        err.print("[red]--gateway-platform needs --scope gateway[/]")
        raise typer.Exit(2)
    expires = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def make(store: KeyStore) -> NewKey:
        return await store.create(
            name,
            set(scope),
            tenant_id=tenant,
            platform=platform,
            user_id=user,
            gateway_platforms=tuple(gateway_platform or ()),
            profiles=tuple(profile or ()),
            expires_at=expires,
        )

    key: NewKey = asyncio.run(_with_store(settings, make))
    if as_json:
        out.print_json(json.dumps({**_describe(key.key_id, name, key), "key": key.token}))
        return
    out.print(f"created key [bold]{key.key_id}[/] ({name}); it is shown only now:")
    out.print(key.token, soft_wrap=True, highlight=False)
    out.print("[dim]present it as: Authorization: Bearer <key>[/]")


@keys_app.command("list")
def list_keys(
    include_revoked: Annotated[bool, typer.Option("--all", help="Also revoked keys.")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """The keys (never their secrets)."""
    settings = load_or_exit(config)

    async def read(store: KeyStore) -> list[KeyInfo]:
        return await store.list(include_revoked=include_revoked)

    keys: list[KeyInfo] = asyncio.run(_with_store(settings, read))
    if as_json:
        out.print_json(json.dumps([_describe(k.key_id, k.name, k) for k in keys]))
        return
    out.print(keys_table(keys))


def keys_table(keys: list[KeyInfo]) -> Table:
    """Fits 80 columns without cutting anything: the key id (what `revoke` takes), the scopes (one
    a line), the creation time (the date above the time) and the state never wrap; a key's
    identity goes under its name; the rest folds (docs/cli.md)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("key id", no_wrap=True, style="bold")
    table.add_column("name / identity", overflow="fold")
    table.add_column("tenant", overflow="fold")
    table.add_column("scopes", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for k in keys:
        p = k.principal
        name = escape(k.name) + (f"\n[dim]{escape(p.platform)}:{escape(p.user_id or '')}[/]" if p.platform else "")
        state = "revoked" if k.revoked_at else "expired" if not k.active else "active"
        scopes = "\n".join(sorted(s.value for s in p.scopes))
        table.add_row(
            escape(k.key_id), name, escape(p.tenant_id), scopes, k.created_at.strftime("%Y-%m-%d\n%H:%M"), state
        )
    return table


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (`keys list`).")],
    config: ConfigOpt = None,
) -> None:
    """Revoke a key: services stop accepting it within `auth.key_cache_s` seconds."""
    settings = load_or_exit(config)

    async def drop(store: KeyStore) -> bool:
        return await store.revoke(key_id)

    if not asyncio.run(_with_store(settings, drop)):
        err.print(f"[red]no live key {key_id!r}[/]")
        raise typer.Exit(1)
    out.print(f"revoked {key_id}")
