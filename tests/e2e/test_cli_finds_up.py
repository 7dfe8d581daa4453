"""The client commands find a running `agentstream up --config FILE` when given the same FILE (its
broker, its services), and `top` scrapes it with the `metrics:read` token `up` left in its private
state folder: no key to copy, no HTTP 401. Another config file means another stack: not this one."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

from agentstream.kafka import free_port
from tests.e2e.conftest import DEMO_ANSWER
from tests.e2e.processes import AGENTSTREAM, spawn, stop

SERVICES = ("ingress", "agent_runner", "tool_executor", "delivery", "persistence")


def _run(args: list[str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    # No credential of the test session: what the command finds must come from the running `up`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTREAM")}
    return subprocess.run(
        [*AGENTSTREAM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_commands_given_the_same_config_find_the_running_up(tmp_path):
    config = tmp_path / "my-stack.yaml"
    ports = "\n".join(f"  {name}: {free_port()}" for name in SERVICES)
    config.write_text(f"http:\n{ports}\n")
    proc = spawn(["up", "--no-chat", "--config", str(config)], {}, tmp_path, tmp_path / "up.log")
    state_file = tmp_path / ".agentstream" / "stack.json"
    try:
        deadline = time.monotonic() + 90
        while not state_file.exists():
            assert proc.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, "up did not come up in 90 s"
            time.sleep(0.2)
        assert json.loads(state_file.read_text())["config"] == str(config.resolve())
        token_file = tmp_path / ".agentstream" / "metrics-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        sent = _run(["send", "calculate 6*7", "--config", "my-stack.yaml", "--platform", "memory", "--json"], tmp_path)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert json.loads(sent.stdout)["text"] == DEMO_ANSWER

        top = _run(["top", "--config", str(config), "--once", "--json", "--interval", "0.2"], tmp_path)
        assert top.returncode == 0, top.stdout + top.stderr
        services = json.loads(top.stdout)["services"]
        assert len(services) == 5 and all(s["up"] for s in services.values()), services

        doctor = _run(["doctor", "--config", str(config), "--json"], tmp_path)
        checks = {c["check"]: c["verdict"] for c in json.loads(doctor.stdout)["checks"]}
        assert checks["kafka"] == checks["topics"] == checks["database"] == "ok", doctor.stdout

        # Another file is another stack: not this one's broker (none is configured there).
        other = tmp_path / "other.yaml"
        other.write_text("kafka: {bootstrap_servers: '127.0.0.1:1'}\n")
        elsewhere = _run(["doctor", "--config", str(other), "--json", "--timeout", "2"], tmp_path)
        assert {c["check"]: c["verdict"] for c in json.loads(elsewhere.stdout)["checks"]}["kafka"] == "fail"
    finally:
        assert stop(proc, signal.SIGINT, timeout=30) == 0, (tmp_path / "up.log").read_text()
