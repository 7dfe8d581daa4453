"""`agentstream top` against real `/metrics` HTTP servers on 127.0.0.1 serving sample text: the
figures as JSON, one printed frame with "–" for a metric no service exports, the scrape token
sent, the live view refreshing, services that do not answer or refuse named, and the CLI's import kept light."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from agentstream_stack import top_cli
from agentstream_stack.cli import app
from agentstream_stack.top import run_top

TOKEN = "scrape-token-for-the-test"
INTERVAL = 0.2


class MetricsServer:
    """Serves `text(n)` on /metrics, n = how many scrapes came before; 401 without the token."""

    def __init__(self, text: Callable[[int], str], token: str | None = TOKEN) -> None:
        self.scrapes = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                body = text(server.scrapes).encode()
                server.scrapes += 1
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def runner_metrics(n: int) -> str:
    # 10 runs started and 4 finished (1 failed) between two scrapes; the same lag seen by two replicas.
    return f"""# TYPE agentstream_runs_started_total counter
agentstream_runs_started_total {10 * n}
# TYPE agentstream_runs_finished_total counter
agentstream_runs_finished_total{{status="completed",reason="stop"}} {3 * n}
agentstream_runs_finished_total{{status="failed",reason="error"}} {n}
# TYPE agentstream_runner_active_runs gauge
agentstream_runner_active_runs 7
# TYPE agentstream_consumer_lag gauge
agentstream_consumer_lag{{group="agentstream.agent-runner",topic="agentstream.runs",partition="0"}} 5
agentstream_consumer_lag{{group="agentstream.agent-runner",topic="agentstream.runs",partition="1"}} 3
"""


def delivery_metrics(n: int) -> str:
    # The legacy dead-letter counter only; 2 rate-limited calls per scrape interval.
    return f"""# TYPE agentstream_delivery_platform_calls_total counter
agentstream_delivery_platform_calls_total{{platform="telegram",op="edit",outcome="rate_limited"}} {2 * n}
agentstream_delivery_platform_calls_total{{platform="telegram",op="edit",outcome="ok"}} {50 * n}
# TYPE agentstream_dead_letters_total counter
agentstream_dead_letters_total{{service="delivery",topic="agentstream.events"}} 4
# TYPE agentstream_consumer_lag gauge
agentstream_consumer_lag{{group="agentstream.delivery",topic="agentstream.events",partition="0"}} 100
agentstream_consumer_lag{{group="agentstream.agent-runner",topic="agentstream.runs",partition="0"}} 5
"""


@pytest.fixture
def servers() -> Iterator[dict[str, MetricsServer]]:
    made = {
        "agent-runner": MetricsServer(runner_metrics),
        "delivery": MetricsServer(delivery_metrics),
        "persistence": MetricsServer(lambda n: "", token="another-token"),
    }
    yield made
    for server in made.values():
        server.close()


def top(*args: str, urls: dict[str, str]) -> Result:
    url_args = [arg for service, url in urls.items() for arg in ("--url", f"{service}={url}")]
    env = {"AGENTSTREAM_METRICS_TOKEN": TOKEN, "COLUMNS": "200"}
    return CliRunner().invoke(app, ["top", "--interval", str(INTERVAL), *url_args, *args], env=env)


def closed_port_url() -> str:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()
    return f"http://127.0.0.1:{port}"


def test_json_sums_services_and_rates_between_two_scrapes(servers: dict[str, MetricsServer]) -> None:
    urls = {name: s.url for name, s in servers.items()} | {"ingress": closed_port_url()}
    result = top("--json", urls=urls)
    assert result.exit_code == 0, result.output
    frame = json.loads(result.output)
    figures = frame["figures"]
    # Counters grew by 10 (started), 4 (finished), 1 (failed), 2 (429s) in one interval of ≥ 0.2 s.
    for figure, grown in [
        ("runs_started_per_s", 10),
        ("runs_finished_per_s", 4),
        ("runs_failed_per_s", 1),
        ("rate_limited_per_s", 2),
    ]:
        assert 0 < figures[figure] <= grown / INTERVAL, (figure, figures[figure])
    assert figures["runs_started_per_s"] == pytest.approx(10 * figures["runs_failed_per_s"])
    assert figures["active_runs"] == 7
    assert figures["rate_limited"] == 2  # the second scrape's total
    assert figures["dead_letters"] == 4 and figures["dead_letters_per_s"] == 0
    # One partition reported by two services counts once.
    assert frame["lag"] == {"agentstream.agent-runner": 8, "agentstream.delivery": 100}
    assert figures["consumer_lag"] == 108
    services = frame["services"]
    assert services["agent-runner"] == {"url": servers["agent-runner"].url, "up": True, "error": None}
    assert services["ingress"]["up"] is False and "not answering" in services["ingress"]["error"]
    assert services["persistence"]["up"] is False and "HTTP 401" in services["persistence"]["error"]
    assert servers["agent-runner"].scrapes == 2


def test_a_metric_no_service_exports_is_absent_not_zero() -> None:
    only_delivery = MetricsServer(delivery_metrics)
    try:
        result = top("--json", urls={"delivery": only_delivery.url})
        once = top("--once", urls={"delivery": only_delivery.url})
    finally:
        only_delivery.close()
    figures = json.loads(result.output)["figures"]
    assert figures["runs_started_per_s"] is None and figures["active_runs"] is None
    assert figures["rate_limited"] == 2
    assert once.exit_code == 0, once.output
    lines = {line.strip("│ ").split("│")[0].strip(): line for line in once.output.splitlines() if "│" in line}
    assert lines["runs started /s"].rstrip(" │").endswith("–")
    assert lines["active runs"].rstrip(" │").endswith("–")
    assert lines["dead letters (total)"].rstrip(" │").endswith("4")
    assert "agentstream.delivery" in once.output  # the lag table


def test_without_the_token_every_service_says_so(servers: dict[str, MetricsServer]) -> None:
    result = CliRunner().invoke(
        app,
        ["top", "--json", "--interval", str(INTERVAL), "--url", f"agent-runner={servers['agent-runner'].url}"],
        env={},
    )
    frame = json.loads(result.output)
    assert frame["services"]["agent-runner"]["up"] is False
    assert "metrics token" in frame["services"]["agent-runner"]["error"]
    assert frame["figures"]["runs_started_per_s"] is None


def test_a_bad_url_option_is_refused() -> None:
    result = CliRunner().invoke(app, ["top", "--once", "--url", "agent-runner"])
    assert result.exit_code == 2
    assert "SERVICE=http" in result.output


def test_the_cli_imports_the_live_view_only_inside_the_command() -> None:
    """`agentstream top --help` loads top_cli: the live view's imports stay in the function."""
    tree = ast.parse(Path(top_cli.__file__).read_text())
    top_level = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {m for m in top_level if m and m.startswith("agentstream_stack.top")}
    (command,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "top"]
    inside = {n.module for n in ast.walk(command) if isinstance(n, ast.ImportFrom)}
    assert "agentstream_stack.top" in inside


def test_an_older_metric_stands_in_until_the_newer_one_exists() -> None:
    def legacy(n: int) -> str:
        return f"""# TYPE agentstream_runner_records_total counter
agentstream_runner_records_total{{type="run.start"}} {5 * n}
agentstream_runner_records_total{{type="tool.call_result"}} {100 * n}
# TYPE agentstream_runner_active_conversations gauge
agentstream_runner_active_conversations 3
"""

    runner = MetricsServer(legacy)
    try:
        figures = json.loads(top("--json", urls={"agent-runner": runner.url}).output)["figures"]
    finally:
        runner.close()
    # Only the run.start records count: 5 per interval of at least INTERVAL seconds.
    assert 0 < figures["runs_started_per_s"] <= 5 / INTERVAL
    assert figures["active_runs"] == 3
    assert figures["runs_finished_per_s"] is None


async def test_the_live_view_keeps_scraping_until_stopped() -> None:
    server = MetricsServer(runner_metrics)
    screen = io.StringIO()
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                run_top({"agent-runner": server.url}, TOKEN, 0.1, False, False, Console(file=screen, width=100)), 1.5
            )
    finally:
        server.close()
    assert server.scrapes >= 4, server.scrapes  # the first frame needs two, every refresh one more
    assert "runs started /s" in screen.getvalue() and "agentstream.agent-runner" in screen.getvalue()


@pytest.mark.timeout(90)  # a fresh interpreter on a busy machine
def test_q_on_the_terminal_quits_the_live_view() -> None:
    """On a real terminal (a pty): the live view runs until `q` is typed, then exits 0 and gives the
    terminal back as it was (echo on)."""
    import os
    import pty
    import subprocess
    import sys
    import termios
    import time

    server = MetricsServer(runner_metrics)
    primary, secondary = pty.openpty()
    echo_before = termios.tcgetattr(secondary)[3] & termios.ECHO
    env = {**os.environ, "AGENTSTREAM_METRICS_TOKEN": TOKEN, "COLUMNS": "100", "TERM": "xterm"}
    cmd = [sys.executable, "-m", "agentstream_stack", "top", "--interval", "0.2", "--url", f"agent-runner={server.url}"]
    proc = subprocess.Popen(cmd, stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    screen = b""
    try:
        deadline = time.monotonic() + 60
        while b"runs started" not in screen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = __import__("select").select([primary], [], [], 0.5)
            if ready:
                screen += os.read(primary, 65536)
        assert b"runs started" in screen, screen[-2000:]
        scrapes = server.scrapes
        time.sleep(0.6)
        assert proc.poll() is None and server.scrapes > scrapes  # still live, still scraping
        os.write(primary, b"q")
        assert proc.wait(timeout=15) == 0
        assert termios.tcgetattr(secondary)[3] & termios.ECHO == echo_before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
        os.close(secondary)
        server.close()
