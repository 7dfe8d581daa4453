"""`agentstream up|serve|send|demo`: the embedded stack, one service, one message, the demo."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, NoReturn

import httpx
import typer

from agentstream.config import SERVICES, ConfigError, Settings
from agentstream.contracts import InboundMessage, RunFinished, RunStatus, User
from agentstream.host import ServiceHost, install_stop_signals, run_until_stopped
from agentstream.kafka import create_topics
from agentstream.kafka.flavor import resolve_flavor
from agentstream.observability import configure_logging
from agentstream_stack.cli_errors import ExitCode, command_line
from agentstream_stack.cli_support import (
    ConfigOpt,
    config_path,
    err,
    exit_on_config_error,
    load_or_exit,
    masked,
    out,
)
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.run_follower import StreamPrinter
from agentstream_stack.send_cli import send_and_print
from agentstream_stack.services import build_service
from agentstream_stack.state_dir import STATE_DIR, StateDirBusy, busy_port, locked, private_dir
from agentstream_tools.sandbox.isolation import SandboxUnavailable


def up(
    config: ConfigOpt = None,
    broker: Annotated[
        bool, typer.Option(help="Start the embedded Tansu broker (else use kafka.bootstrap_servers).")
    ] = True,
    chat: Annotated[bool | None, typer.Option(help="Chat in this terminal (default: when stdin is a TTY).")] = None,
) -> None:
    """Start the embedded stack (broker, database, five services).

    Everything in this process: the embedded broker (unless --no-broker), the database, all five services.
    """
    settings = load_or_exit(config)
    state_dir = private_dir(STATE_DIR)
    # Before anything is touched (log, database, keys): a second `up` here leaves the running one alone.
    try:
        with locked(state_dir):
            ports = [settings.http.port_for(name) for name in SERVICES]
            if (port := busy_port(settings.http.host, ports)) is not None:
                _refuse(
                    f"port {port} is in use — is another `agentstream up` running here? set `http.*` to use other ports"
                )
            try:
                code = _up(settings, state_dir, broker, chat, config_path(config))
            except SandboxUnavailable as e:  # the host cannot isolate model-written commands
                exit_on_config_error(e)
    except StateDirBusy as busy:
        _refuse(str(busy))
    if code is not None:
        raise typer.Exit(ExitCode.BROKER_DIED)


def _refuse(message: str) -> NoReturn:
    err.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(ExitCode.IN_USE)


def _up(settings: Settings, state_dir: Path, broker: bool, chat: bool | None, config_file: Path | None) -> int | None:
    """The stack until a signal stops it (or its broker dies: that exit code; else None)."""
    interactive = sys.stdin.isatty() if chat is None else chat
    log_file = str(state_dir / "agentstream.log") if interactive else None
    configure_logging(settings.log_level, log_file=log_file, settings=settings)

    async def main() -> int | None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        out.print("[dim]starting the embedded stack (broker, topics, database, 5 services)…[/]")
        async with embedded_stack(
            settings,
            start_broker=broker,
            console=out,
            broker_log=state_dir / "broker.log",
            admin_key=True,
            secrets_dir=state_dir,
            config_file=config_file,
        ) as stack:
            d = stack.describe()
            out.print(
                f"[green]agentstream is up[/]  kafka [bold]{d['kafka']}[/] (prefix {d['topic_prefix']})"
                f"  database [bold]{masked(d['database'])}[/]"
            )
            for name, url in d["services"].items():
                out.print(f"  {name:<14} {url}  (/healthz /readyz /metrics)")
            if log_file:
                out.print(f"  logs           {log_file}")
            out.print(
                "  [dim]credentials    Authorization: Bearer <key> on every route but /healthz /readyz;[/]",
                soft_wrap=True,
            )
            out.print(
                "  [dim]               /metrics too (the admin key, or a key with metrics:read)[/]", soft_wrap=True
            )
            if stack.new_admin_key:
                # Printed, never logged nor written: the database keeps only its hash.
                out.print("[bold yellow]admin key[/] (save it; it is not shown again):")
                out.print(f"  {stack.new_admin_key}", soft_wrap=True, highlight=False)
            else:
                out.print(
                    f"  [dim]admin key: the one printed on the first start (`{command_line('keys create')}` makes more)[/]"
                )
            out.print(f"  web chat       {stack.web_link()}", soft_wrap=True, highlight=False)
            out.print(f'[dim]send from another terminal: {command_line("send")} "calculate 6*7"   ·   Ctrl-C stops[/]')
            watch = asyncio.create_task(stack.watch_broker(stop), name="embedded-broker-watch")
            if interactive:
                from agentstream_stack.console_chat import chat_loop

                await chat_loop(stack.services["ingress"], stack.services["delivery"], out, stop)
            await stop.wait()
            watch.cancel()
            if stack.broker_exit_code is not None:
                # Never a silent zombie: services without their broker serve nothing. Stop, and say why.
                err.print(
                    f"[red bold]the embedded broker exited (code {stack.broker_exit_code}); everything it "
                    "held (topics, records, offsets) is gone. Stopping the stack; start it again with "
                    "`agentstream up`.[/]"
                )
            out.print("[dim]stopping…[/]")
        out.print("[green]stopped[/]")
        return stack.broker_exit_code

    return run_until_stopped(main())


def serve(
    service: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}")],
    config: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="HTTP bind address (default http.host).")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default http.<service>).")] = None,
) -> None:
    """Run one service (docker-compose, Kubernetes, own processes)."""
    if service not in SERVICES:
        err.print(f"[red]unknown service {service!r}; choose one of: {', '.join(SERVICES)}[/]")
        raise typer.Exit(ExitCode.USAGE)
    settings = load_or_exit(config)
    configure_logging(settings.log_level, settings=settings)

    async def main() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        if settings.kafka.auto_create_topics:
            await create_topics(settings.kafka)
        resolved = settings.model_copy(update={"kafka": await resolve_flavor(settings.kafka)})
        try:
            svc = build_service(service, resolved)
        except (ConfigError, SandboxUnavailable) as e:  # checked when built: a secret's env var, the sandbox
            exit_on_config_error(e)
        ports = {service: port or settings.http.port_for(service)}
        async with ServiceHost([svc], host or settings.http.host, ports):
            await stop.wait()

    run_until_stopped(main())


def demo(config: ConfigOpt = None) -> None:
    """Run a scripted conversation on a throwaway embedded stack.

    Starts the embedded stack, asks the scripted model something that needs a tool, shows what was stored, stops.
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentstream-demo-") as tmp:
        settings = load_or_exit(config, database={"url": f"sqlite+aiosqlite:///{tmp}/demo.db"})
        configure_logging("WARNING", settings=settings)

        async def main() -> RunFinished | None:
            out.print("[dim]starting the embedded stack…[/]")
            async with embedded_stack(settings, ports=free_ports(), state_file=None, admin_key=True) as stack:
                out.print(f"[dim]up in {time.monotonic() - t0:.1f} s; asking the demo assistant[/]")
                msg = InboundMessage(
                    id=str(uuid.uuid4()),
                    platform="memory",
                    chat_id="demo",
                    user=User(id="demo-user", name="Demo"),
                    text="calculate 6*7",
                )
                out.print(f"[bold cyan]you>[/] {msg.text}")
                out.print("[bold green]assistant>[/] ", end="")
                finished = await send_and_print(stack.settings, msg, 60, StreamPrinter(out), say=False)
                if finished is None:
                    return None
                assert stack.new_admin_key is not None  # the demo's database is new
                await _print_persisted(stack.urls["persistence"], stack.new_admin_key, finished, msg.conversation_key)
                return finished

        finished = asyncio.run(main())
    if finished is None or finished.status is not RunStatus.COMPLETED:
        err.print("[red]the demo run did not complete[/]")
        raise typer.Exit(ExitCode.FAILED)
    out.print(f"[green]demo finished in {time.monotonic() - t0:.1f} s[/]")


async def _print_persisted(persistence_url: str, admin_key: str, finished: RunFinished, key: str) -> None:
    headers = {"Authorization": f"Bearer {admin_key}"}
    async with httpx.AsyncClient(base_url=persistence_url, timeout=5, headers=headers) as http:
        for _ in range(100):  # the flush follows run.finished by a few milliseconds
            resp = await http.get(f"/v1/runs/{finished.root_run_id}")
            if resp.status_code == 200:
                break
            await asyncio.sleep(0.1)
        resp.raise_for_status()
        run = resp.json()
        out.print(
            f"[bold]persisted run[/] {run['run_id']}: status={run['status']} "
            f"llm_calls={run['llm_calls']} text={run['text']!r}"
        )
        # A fresh demo database: the conversation's messages fit in the first page.
        messages = (await http.get(f"/v1/conversations/{key}/messages")).json()["items"]
        for m in messages:
            out.print(f"  [dim]{m['role']:>9}[/] {m['content']}")
