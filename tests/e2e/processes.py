"""Start `agentstream` commands as real child processes and clean them up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agentstream_testing.fixtures import ADMIN_TOKEN_ENV

AGENTSTREAM = [sys.executable, "-m", "agentstream_stack"]


def spawn(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    # Every test process accepts the test session's bootstrap admin token (agentstream_testing.fixtures).
    full_env = {**os.environ, "AGENTSTREAM__AUTH__ADMIN_TOKEN_ENV": ADMIN_TOKEN_ENV, **env}
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*AGENTSTREAM, *args],
            env=full_env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not running: look at its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (read from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members
