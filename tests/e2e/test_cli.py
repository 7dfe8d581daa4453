"""Acceptance 6: `agentstream demo`, and `agentstream up` leaves nothing behind on SIGINT/SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import httpx
import pytest
from tests.e2e.processes import AGENTSTREAM, group_members, pid_alive, spawn, stop

from agentstream.kafka import free_port


def test_demo_exits_zero_quickly_and_prints_the_reply(tmp_path):
    t0 = time.monotonic()
    result = subprocess.run([*AGENTSTREAM, "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
                            stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - t0
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed < 60
    assert "6*7 = 42" in result.stdout
    assert "persisted run" in result.stdout and "status=completed" in result.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_up_stops_cleanly_and_leaves_no_process(tmp_path, sig):
    env = {f"AGENTSTREAM__HTTP__{name}": str(free_port())
           for name in ("INGRESS", "AGENT_RUNNER", "TOOL_EXECUTOR", "DELIVERY", "PERSISTENCE")}
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
