"""`agentstream runs list|show|resume`: find failed or interrupted runs and continue them.

list/show read the database persistence writes; resume produces a `ResumeRun` on `runs`
(keyed by the conversation, like ingress's `/resume`) and follows the run on `events`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from agentstream.config import KafkaSettings
from agentstream.contracts import ResumeRun, RunFinished, RunStatus
from agentstream.kafka.flavor import resolve_flavor
from agentstream_persistence.pages import MAX_PAGE_SIZE, InvalidCursor, Key
from agentstream_persistence.queries import RUNS
from agentstream_persistence.rows import shorten
from agentstream_stack.cli_errors import command_line, explain
from agentstream_stack.cli_support import ConfigOpt, client_settings, err, out
from agentstream_stack.run_follower import RunFollower, RunRecorder, StreamPrinter
from agentstream_stack.runs_store import (
    AmbiguousRunId,
    RunDetail,
    RunListItem,
    RunListPage,
    RunsUnavailable,
    list_runs,
    show_run,
)

T = TypeVar("T")
runs_app = typer.Typer(no_args_is_help=True, add_completion=False)  # its help: the root's COMMANDS


WIDE_TERMINAL, MEDIUM_TERMINAL = 150, 110  # columns
SHORT_ID = 8  # as ingress's /resume names a run
STATUS_STYLE: dict[str, str] = {RunStatus.COMPLETED: "green", RunStatus.FAILED: "red", RunStatus.INTERRUPTED: "yellow"}
RunIdArg = Annotated[str, typer.Argument(help="The run id (or a prefix that only it starts with).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (persistence's read API shapes) instead.")]


def _when(ts: datetime | None) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if ts is not None else "—"


def _short_id(run_id: str) -> str:
    return run_id if len(run_id) <= SHORT_ID + 3 else run_id[:SHORT_ID] + "…"


def _status(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{escape(status)}[/]"


def _brief(value: Any, limit: int = 80) -> str:
    text = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    )
    return shorten(" ".join(text.split()), limit)


def _ending(reason: str | None, error: str | None, limit: int = 60) -> str:
    return _brief(": ".join(p for p in (reason, error) if p), limit) if reason or error else ""


def _run_or_exit(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except (RunsUnavailable, AmbiguousRunId) as e:
        if e.__cause__ is not None and explain(e.__cause__) is not None:
            raise e.__cause__ from None  # the database is not there: the root's one line, exit 5
        err.print(f"[red]{escape(str(e))}[/]")
        raise typer.Exit(1) from None


def _after(cursor: str | None) -> Key | None:
    try:
        return None if cursor is None else RUNS.decode(cursor)
    except InvalidCursor:
        raise typer.BadParameter(
            "invalid cursor: pass the next cursor a previous list printed", param_hint="'--cursor'"
        ) from None


@runs_app.command("list")
def runs_list(
    status: Annotated[
        list[RunStatus] | None, typer.Option("--status", "-s", help="Only runs that ended so (repeat for several).")
    ] = None,
    conversation: Annotated[
        str | None, typer.Option(help="Only this conversation key (platform:chat_id[:thread]).")
    ] = None,
    resumable: Annotated[bool, typer.Option("--resumable", help="Only runs with a checkpoint (resumable).")] = False,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE_SIZE, help="At most this many runs (a page).")] = 20,
    cursor: Annotated[str | None, typer.Option(help="The next page: the cursor a previous list printed.")] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Stored runs, newest ending first, and whether each can be resumed."""
    after = _after(cursor)
    settings = client_settings(config)
    page = _run_or_exit(
        list_runs(
            settings.database.url,
            statuses=[s.value for s in status or []],
            conversation=conversation,
            resumable=resumable,
            limit=limit,
            after=after,
        )
    )
    if as_json:
        typer.echo(page.model_dump_json(indent=2))
        return
    _print_page(page, limit)


def _print_page(page: RunListPage, limit: int) -> None:
    runs = page.items
    if not runs:
        out.print("[dim]no runs match[/]")
        return
    full_ids = out.width >= WIDE_TERMINAL
    out.print(_runs_table(runs, limit, full_ids, all_columns=out.width >= MEDIUM_TERMINAL))
    if not full_ids and any(_short_id(r.run_id) != r.run_id for r in runs):
        out.print(
            "[dim]run ids shortened (a wider terminal or --json shows them whole); "
            "show and resume take the shown prefix without the …[/]"
        )
    if page.next_cursor is not None:
        # One unbroken line, so the cursor can be copied whole from a narrow terminal too.
        out.print(f"[dim]more: --cursor {page.next_cursor}[/]", soft_wrap=True, highlight=False)


def _runs_table(runs: list[RunListItem], limit: int, full_ids: bool, all_columns: bool) -> Table:
    """Full run ids need a wide terminal, else a prefix (show and resume take one); a narrow
    terminal also drops the assistant and start time (--json has everything)."""
    table = Table(
        title=f"runs, newest first (at most {limit})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),  # one space between columns: 80 columns hold the conversation key whole
        expand=True,  # the room left goes to the conversation and the reason, by their ratios
    )
    table.add_column("run id", no_wrap=True, style="bold")
    table.add_column("conversation", overflow="fold", ratio=2)  # the room left: a supergroup's key whole
    if all_columns:
        table.add_column("assistant", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("reason / error", ratio=1, overflow="fold")
    if all_columns:
        table.add_column("started (UTC)", min_width=10)  # the date above the time
    # Narrow, the date goes above the time: the room is the conversation's.
    table.add_column("finished (UTC)", min_width=10, max_width=None if all_columns else 10)
    table.add_column("resumable", justify="center", no_wrap=True)  # a checkpoint exists
    for r in runs:
        cells = [escape(r.run_id if full_ids else _short_id(r.run_id)), escape(r.conversation_key)]
        cells += [escape(r.assistant_id or "—")] if all_columns else []
        cells += [_status(r.status), escape(_ending(r.reason, r.error))]
        cells += [_when(r.started_at)] if all_columns else []
        cells += [_when(r.finished_at), "[green]yes[/]" if r.checkpoint else "[dim]—[/]"]
        table.add_row(*cells)
    return table


def _detail_or_exit(url: str, run_id: str) -> RunDetail:
    detail = _run_or_exit(show_run(url, run_id))
    if detail is None:
        err.print(
            f"[red]unknown run {escape(run_id)}: no stored run has this id "
            f"(a run is stored once it ends; see {command_line('runs list')})[/]"
        )
        raise typer.Exit(1)
    return detail


@runs_app.command("show")
def runs_show(run_id: RunIdArg, as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """One run: how it ended, its messages, its checkpoint and the steps a resume keeps."""
    detail = _detail_or_exit(client_settings(config).database.url, run_id)
    if as_json:
        typer.echo(detail.model_dump_json(indent=2))
        return
    _print_detail(detail)


def _print_detail(detail: RunDetail) -> None:
    run, cp = detail.run, detail.checkpoint
    out.print(
        f"[bold]run {escape(run.run_id)}[/]  {_status(run.status)}"
        + (f"  reason [bold]{escape(run.reason)}[/]" if run.reason else "")
    )
    out.print(
        f"  conversation {escape(run.conversation_key)} · assistant {escape(run.assistant_id or '—')} · "
        f"connector {escape(run.connector_id or '—')} · user {escape(run.user_id or '—')} · "
        f"session {escape(run.session_id or '—')}",
        highlight=False,
    )
    out.print(
        f"  started {_when(run.started_at)} · finished {_when(run.finished_at)} UTC · "
        f"{run.duration_ms:.0f} ms · {run.llm_calls} LLM calls · "
        f"{run.prompt_tokens}+{run.completion_tokens} tokens",
        highlight=False,
    )
    if run.error:
        out.print(f"  [red]error[/] {escape(run.error)}", highlight=False)
    if run.text:
        out.print(f"  text {escape(_brief(run.text, 200))}", highlight=False)
    out.print(f"[bold]messages[/] ({len(detail.messages)})")
    for m in detail.messages:
        out.print(f"  [dim]{m.seq:>4}[/] {m.role:>9}  {escape(_brief(m.content, 120))}", highlight=False)
    if cp is None:
        out.print(
            "[bold]checkpoint[/] none: completed runs have none (nor does a resumed run once it completed); "
            "this run cannot be resumed"
        )
        return
    out.print(
        f"[bold]checkpoint[/] {_status(cp.status)} {escape(_ending(cp.reason, cp.error, 120))} · "
        f"last seq {cp.last_seq} · resume attempts {cp.resume_attempts} · "
        f"LLM calls so far {cp.usage.get('llm_calls', 0)} · updated {_when(cp.updated_at)} UTC",
        highlight=False,
    )
    if cp.steps:
        table = Table(title="completed steps (a resume does not repeat them)", title_justify="left")
        for name in ("seq", "type", "step id", "input", "output"):
            table.add_column(name, no_wrap=name in ("seq", "type"))
        for s in cp.steps:
            table.add_row(str(s.seq), s.step_type, escape(s.step_id), escape(_brief(s.input)), escape(_brief(s.output)))
        out.print(table)
    else:
        out.print("  no completed steps: a resume starts the run over from its input")
    out.print(f"[dim]resume with: {command_line('runs resume ' + escape(run.run_id))}[/]")


async def _resume(
    kafka: KafkaSettings,
    command: ResumeRun,
    after_seq: int,
    wait: bool,
    timeout: float,
    recorder: RunRecorder | None = None,
) -> RunFinished | None:
    """Request the resume and follow it: printed as it streams, or only into `recorder` (--json)."""
    async with RunFollower(
        await resolve_flavor(kafka)
    ) as follower:  # positioned on `events` before the command goes out
        await follower.resume(command)
        if recorder is None:
            out.print(
                f"resume requested: run [bold]{escape(command.run_id)}[/] "
                f"(conversation {escape(command.conversation_key)})",
                highlight=False,
            )
        if not wait:
            return None
        printer = recorder if recorder is not None else StreamPrinter(out)
        # Until the runner starts it (a resume waits for the conversation's current run).
        waiting = out.status(f"waiting for an agent-runner to resume run {escape(command.run_id)}…")
        if recorder is None:
            waiting.start()
        try:
            async with asyncio.timeout(timeout):
                async for event in follower.follow_resumed(command, after_seq):
                    waiting.stop()
                    printer(event)
                    if isinstance(event, RunFinished) and event.run_id == command.run_id:
                        return event
        finally:
            waiting.stop()
    return None


@runs_app.command("resume")
def runs_resume(
    run_id: RunIdArg,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Follow the run to its end (default) or only request the resume.")
    ] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to follow the run.")] = 300.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (the resumed run's outcome) instead.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """Continue a failed or interrupted run from its checkpoint: completed LLM and tool steps are not repeated."""
    settings = client_settings(config)
    detail = _detail_or_exit(settings.database.url, run_id)
    run, cp = detail.run, detail.checkpoint
    if cp is None:
        err.print(
            f"[red]run {escape(run.run_id)} has no checkpoint (it ended {run.status}"
            f"{', ' + escape(run.reason) if run.reason else ''}): only failed or interrupted runs "
            "can be resumed[/]"
        )
        raise typer.Exit(1)
    command = ResumeRun(conversation_key=cp.conversation_key, run_id=run.run_id)
    recorder = RunRecorder() if as_json else None
    try:
        finished = asyncio.run(_resume(settings.kafka, command, cp.last_seq, wait, timeout, recorder))
    except TimeoutError:
        err.print(
            f"[red]run {escape(run.run_id)} did not finish within {timeout:.0f} s; it may still be running: "
            f"{command_line('runs show ' + escape(run.run_id))}[/]"
        )
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        err.print("[yellow]stopped following; the resume goes on without this command[/]")
        raise typer.Exit(130) from None
    if recorder is not None:
        document = {**recorder.document(conversation_key=command.conversation_key), "run_id": run.run_id}
        typer.echo(json.dumps({**document, "waited": wait}, ensure_ascii=False, indent=2))
    if not wait:
        return
    if finished is None:  # the events stream ended first (the consumer was stopped)
        err.print(f"[red]lost sight of run {escape(run.run_id)}: {command_line('runs show ' + escape(run.run_id))}[/]")
        raise typer.Exit(1)
    if recorder is None:
        style = STATUS_STYLE.get(finished.status, "white")
        out.print(f"[{style}]run {escape(run.run_id)} resumed: {finished.status}[/]", highlight=False)
    if finished.status is not RunStatus.COMPLETED:
        raise typer.Exit(1)
