"""The CLI end to end: `agentstream demo` answers and exits, `agentstream up` leaves nothing behind on SIGINT/SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import time

import httpx
import pytest

from agentstream.kafka import free_port
from tests.e2e.processes import AGENTSTREAM, group_members, pid_alive, spawn, stop


def test_demo_exits_zero_and_prints_the_reply(tmp_path):
    # How fast it answers is bench's business; the timeout only says it does not hang.
    result = subprocess.run(
        [*AGENTSTREAM, "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6*7 = 42" in result.stdout
    assert "persisted run" in result.stdout and "status=completed" in result.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_up_stops_cleanly_and_leaves_no_process(tmp_path, sig):
    env = {
        f"AGENTSTREAM__HTTP__{name}": str(free_port())
        for name in ("INGRESS", "AGENT_RUNNER", "TOOL_EXECUTOR", "DELIVERY", "PERSISTENCE")
    }
    proc = spawn(["up", "--no-chat"], env, tmp_path, tmp_path / "up.log")
    state_file = tmp_path / ".agentstream" / "stack.json"
    try:
        deadline = time.monotonic() + 60
        while not state_file.exists():
            assert proc.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, "up did not come up in 60 s"
            time.sleep(0.2)
        state = json.loads(state_file.read_text())
        broker_pid = state["broker_pid"]
        assert pid_alive(broker_pid)
        ready = httpx.get(f"{state['services']['agent-runner']}/readyz", timeout=5)
        assert ready.status_code == 200
    finally:
        code = stop(proc, sig, timeout=30)
    assert code == 0, (tmp_path / "up.log").read_text()
    for _ in range(50):
        if not pid_alive(broker_pid):
            break
        time.sleep(0.1)
    assert not pid_alive(broker_pid), "the embedded broker outlived `agentstream up`"
    assert not state_file.exists()
    # No service process either: everything ran inside `up`, whose process group is now empty.
    assert group_members(proc.pid) == []


KEY = re.compile(r"agsk_[a-f0-9]{12}_[A-Za-z0-9_-]{43}")
WEB_LINK = re.compile(r"(http://127\.0\.0\.1:\d+)/web/local#token=(\S+)")


def _up_until_linked(tmp_path, env, log):
    """`agentstream up` in tmp_path until it printed its web link; returns (process, output)."""
    proc = spawn(["up", "--no-chat"], env, tmp_path, log)
    deadline = time.monotonic() + 60
    while "web chat" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "up printed no web link in 60 s"
        time.sleep(0.2)
    return proc, log.read_text()


def _sse_status(base: str, token: str | None) -> tuple[int, str]:
    params = {"token": token} if token else None
    with httpx.stream("GET", f"{base}/v1/web/local/events", params=params, timeout=5) as resp:
        first = next(resp.iter_text(), "") if resp.status_code == 200 else ""
        return resp.status_code, first


def test_up_prints_an_admin_key_once_and_a_web_link_every_start(tmp_path):
    ports = {name: free_port() for name in ("INGRESS", "AGENT_RUNNER", "TOOL_EXECUTOR", "DELIVERY", "PERSISTENCE")}
    env = {f"AGENTSTREAM__HTTP__{name}": str(port) for name, port in ports.items()}
    persistence = f"http://127.0.0.1:{ports['PERSISTENCE']}/v1/conversations/web:local/runs"
    metrics = f"http://127.0.0.1:{ports['PERSISTENCE']}/metrics"

    proc, first = _up_until_linked(tmp_path, env, tmp_path / "up-1.log")
    try:
        keys = KEY.findall(first)
        assert len(keys) == 1 and "not shown again" in first, first
        assert "/metrics too" in first and "Authorization: Bearer <key>" in first
        admin = {"Authorization": f"Bearer {keys[0]}"}
        assert httpx.get(persistence, headers=admin, timeout=5).status_code == 200
        assert httpx.get(persistence, timeout=5).status_code == 401
        assert httpx.get(metrics, headers=admin, timeout=5).status_code == 200
        assert httpx.get(metrics, timeout=5).status_code == 401
        link = WEB_LINK.search(first)
        assert link is not None, first
        base, first_token = link.group(1), link.group(2)
        assert base.endswith(f":{ports['DELIVERY']}")
        assert _sse_status(base, first_token) == (200, ": connected\n\n")
        assert _sse_status(base, None)[0] == 401
    finally:
        assert stop(proc, signal.SIGINT, timeout=30) == 0, (tmp_path / "up-1.log").read_text()
    secret_file = tmp_path / ".agentstream" / "web-secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert keys[0] not in "".join(
        p.read_text(errors="replace") for p in (tmp_path / ".agentstream").iterdir() if p.is_file()
    )  # the key is in no file of the stack

    proc, second = _up_until_linked(tmp_path, env, tmp_path / "up-2.log")
    try:
        assert KEY.findall(second) == [] and "not shown again" not in second, second
        assert httpx.get(persistence, headers={"Authorization": f"Bearer {keys[0]}"}, timeout=5).status_code == 200
        link = WEB_LINK.search(second)
        assert link is not None and link.group(2) != first_token
        assert _sse_status(base, link.group(2))[0] == 200
        assert _sse_status(base, first_token)[0] == 200  # the secret persisted: the old link still works
    finally:
        assert stop(proc, signal.SIGINT, timeout=30) == 0, (tmp_path / "up-2.log").read_text()
