"""`agentstream up` when its embedded broker dies: said loudly, the stack stops, non-zero exit
(`BROKER_DIED_EXIT`), nothing left running. Never a zombie stack without a broker."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from agentstream.kafka import free_port
from agentstream_stack.cli import BROKER_DIED_EXIT
from tests.e2e.processes import group_members, pid_alive, spawn, stop

pytestmark = pytest.mark.chaos


def test_up_stops_with_a_nonzero_exit_when_its_broker_is_killed(tmp_path):
    env = {
        f"AGENTSTREAM__HTTP__{name}": str(free_port())
        for name in ("INGRESS", "AGENT_RUNNER", "TOOL_EXECUTOR", "DELIVERY", "PERSISTENCE")
    }
    log = tmp_path / "up.log"
    proc = spawn(["up", "--no-chat"], env, tmp_path, log)
    state_file = tmp_path / ".agentstream" / "stack.json"
    try:
        deadline = time.monotonic() + 120
        while not state_file.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "up did not come up in 120 s"
            time.sleep(0.2)
        broker_pid = json.loads(state_file.read_text())["broker_pid"]
        os.kill(broker_pid, signal.SIGKILL)
        code = proc.wait(timeout=60)  # how long the test waits for the stop, not how long it may take
    finally:
        stop(proc, timeout=5)
    output = log.read_text()
    assert code == BROKER_DIED_EXIT, output
    assert "the embedded broker exited" in output and "Stopping the stack" in output, output
    assert '"embedded broker exited; stopping the stack"' in output, output
    assert not state_file.exists()
    assert not pid_alive(broker_pid)
    assert group_members(proc.pid) == []
