"""The CLI's tables at 80 columns: no line wider, and nothing one needs is cut or broken.

Each table is rendered by its own function, as the command prints it, into a recording
console of 80 columns with realistic values (long names, every scope, an identity, a
failed run with a long error, a service whose metrics are refused)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console, RenderableType

from agentstream.auth import Scope
from agentstream.auth.keys import KeyInfo
from agentstream.auth.principal import CredentialKind, Principal
from agentstream_stack.keys_cli import keys_table
from agentstream_stack.runs_cli import _runs_table, _short_id
from agentstream_stack.runs_store import RunListItem
from agentstream_stack.top import frame_view
from agentstream_stack.top_metrics import Scrape

WIDTH = 80
NOW = datetime(2026, 12, 5, 22, 40, 7, tzinfo=UTC)


def rendered(table: RenderableType) -> list[str]:
    console = Console(width=WIDTH, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    lines = console.export_text().splitlines()
    assert lines and max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    return lines


def whole(value: str, lines: list[str]) -> bool:
    """`value` appears unbroken on one line."""
    return any(value in line for line in lines)


def column(lines: list[str], header: str, next_header: str | None = None) -> str:
    """A column's cells joined (folded text made whole again), located by its header and the next one."""
    head = next(i for i, line in enumerate(lines) if header in line and (next_header or header) in line)
    start = lines[head].index(header)
    end = lines[head].index(next_header) if next_header else len(lines[head])
    return "".join(line[start:end].strip(" │┃") for line in lines[head + 1 :])


def key(key_id: str, name: str, scopes: frozenset[Scope], **principal: str) -> KeyInfo:
    p = Principal(subject=key_id, kind=CredentialKind.API_KEY, scopes=scopes, **principal)
    return KeyInfo(key_id, name, p, NOW, None, None)


def test_keys_list_fits_80_columns_with_every_id_scope_and_state_whole():
    keys = [
        key("3f9a0c1b2d4e", "ops-dashboard", frozenset(Scope), tenant_id="acme-corp"),
        key("a1b2c3d4e5f6", "telegram-gw", frozenset({Scope.GATEWAY, Scope.MESSAGES_WRITE}), platform="telegram"),
        key("0011aabbccdd", "a-rather-long-key-name-for-the-nightly-batch", frozenset({Scope.RUNS_RESUME})),
    ]
    lines = rendered(keys_table(keys))
    text = "\n".join(lines)
    for k in keys:
        assert whole(k.key_id, lines), text  # what `keys revoke` takes
        assert all(whole(s.value, lines) for s in k.principal.scopes), text
    assert whole("2026-12-05", lines) and whole("22:40", lines) and whole("active", lines)
    assert "…" not in text  # folded where it must, never cut
    assert "a-rather-long-key-name-for-the-nightly-batch" in column(lines, "name / identity", "tenant"), text


def run(run_id: str, status: str, error: str | None = None) -> RunListItem:
    return RunListItem(
        run_id=run_id,
        root_run_id=run_id,
        parent_run_id=None,
        conversation_key="telegram:-1001234567890",
        session_id=None,
        assistant_id="support-assistant",
        connector_id="openai",
        user_id="42",
        tenant_id="default",
        status=status,
        error=error,
        reason="model_error" if error else None,
        text="",
        prompt_tokens=0,
        completion_tokens=0,
        llm_calls=1,
        duration_ms=1200.0,
        started_at=NOW,
        finished_at=NOW,
        checkpoint=error is not None,
    )


def test_runs_list_fits_80_columns_with_ids_statuses_and_dates_whole():
    runs = [
        run("01JEXAMPLE0000000000000001", "completed"),
        run("01JEXAMPLE0000000000000002", "failed", "the model endpoint answered 503 three times in a row"),
    ]
    lines = rendered(_runs_table(runs, 20, full_ids=False, all_columns=False))
    text = "\n".join(lines)
    for r in runs:
        assert whole(_short_id(r.run_id), lines), text  # what `runs show` and `runs resume` take
        assert whole(r.status, lines), text
    assert whole("2026-12-05", lines) and whole("22:40:07", lines), text
    assert whole("telegram:-1001234567890", lines), text
    assert "model_error:" in column(lines, "reason", "finished"), text  # the reason folds, never cut


def test_top_fits_80_columns_and_never_cuts_a_url_or_an_error():
    url = "http://agentstream-agent-runner.agentstream.svc.cluster.local:8080/metrics"
    error = "HTTP 401: set AGENTSTREAM_METRICS_TOKEN or top --token"
    scrapes = [
        Scrape("agent-runner", url, 0.0),
        Scrape("tool-executor", "http://127.0.0.1:8182/metrics", 0.0),
        Scrape("delivery", "http://127.0.0.1:8183/metrics", 0.0, error=error),
    ]
    lines = rendered(frame_view(scrapes, scrapes))
    text = "\n".join(lines)
    assert all(whole(s.service, lines) for s in scrapes), text
    assert url in column(lines, "url", "metrics"), text  # folded onto lines, every character kept
    assert error.replace(" ", "") in column(lines, "metrics").replace(" ", ""), text
    assert "…" not in text
