"""A second `agentstream up` leaves the running one alone: in the same folder it exits at once with
one line and exit code 6 (`IN_USE`), in another folder on the same ports likewise; the first's
keys (admin, the web page's gateway and history keys) keep working. The state folder it leaves
is private: 0700, the database and its WAL 0600."""

from __future__ import annotations

import re
import signal
import stat
from pathlib import Path

import httpx

from agentstream.kafka import free_port
from tests.e2e.processes import spawn, stop
from tests.e2e.test_cli import KEY, WEB_LINK, _up_until_linked

IN_USE = 6
SERVICE_ENV = ("INGRESS", "AGENT_RUNNER", "TOOL_EXECUTOR", "DELIVERY", "PERSISTENCE")


def _second_up(cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Its exit code and all it printed. It must exit by itself (the wait's bound is a hang
    guard, not a speed claim): a second `up` that started a broker would stay up."""
    cwd.mkdir(exist_ok=True)
    log = cwd / "second-up.log"
    proc = spawn(["up", "--no-chat"], env, cwd, log)
    try:
        code = proc.wait(timeout=30)
    finally:
        stop(proc)
    return code, log.read_text().strip()


def test_a_second_up_exits_at_once_and_the_first_keeps_its_keys(tmp_path):
    ports = {name: free_port() for name in SERVICE_ENV}
    env = {f"AGENTSTREAM__HTTP__{name}": str(port) for name, port in ports.items()}
    proc, first = _up_until_linked(tmp_path, env, tmp_path / "up.log")
    try:
        [admin_key] = KEY.findall(first)
        link = WEB_LINK.search(first)
        assert link is not None, first
        base, token = link.group(1), link.group(2)

        code, output = _second_up(tmp_path, env)
        assert (code, output) == (
            IN_USE,
            f"error: another `agentstream up` is running in {tmp_path / '.agentstream'} (pid {proc.pid})",
        )

        code, output = _second_up(tmp_path / "elsewhere", env)
        busy = re.fullmatch(
            r"error: port (\d+) is in use — is another `agentstream up` running here\? "
            r"set `http\.\*` to use other ports",
            output,
        )
        assert code == IN_USE and busy is not None, output
        assert int(busy.group(1)) == ports["INGRESS"]
        assert not (tmp_path / "elsewhere" / ".agentstream" / "agentstream.db").exists()  # nothing touched

        page = {"Authorization": f"Bearer {token}"}
        posted = httpx.post(f"{base}/v1/web/local/messages", json={"text": "still here?"}, headers=page, timeout=10)
        assert posted.status_code == 202, posted.text  # the gateway key delivery forwards with
        history = httpx.get(f"{base}/v1/web/local/history", headers=page, timeout=10)
        assert history.status_code == 200, history.text  # the history key delivery reads with
        runs = f"http://127.0.0.1:{ports['PERSISTENCE']}/v1/conversations/web:local/runs"
        assert httpx.get(runs, headers={"Authorization": f"Bearer {admin_key}"}, timeout=5).status_code == 200
        assert proc.poll() is None
        state = tmp_path / ".agentstream"
        running = {
            p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir() if p.name.startswith("agentstream.db")
        }
        assert {"agentstream.db", "agentstream.db-wal"} <= running.keys(), running  # SQLite in WAL mode
    finally:
        assert stop(proc, signal.SIGINT, timeout=30) == 0, (tmp_path / "up.log").read_text()

    assert running == dict.fromkeys(running, 0o600)  # the database, its WAL and shared memory: the user's only
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_a_second_up_after_the_first_stopped_starts(tmp_path):
    """The lock is the running process's, not the folder's: once it ends, `up` starts again."""
    env = {f"AGENTSTREAM__HTTP__{name}": str(free_port()) for name in SERVICE_ENV}
    proc, _ = _up_until_linked(tmp_path, env, tmp_path / "up-1.log")
    assert stop(proc, signal.SIGKILL, timeout=30) == -signal.SIGKILL  # no clean exit: the kernel drops the lock
    proc, _ = _up_until_linked(tmp_path, env, tmp_path / "up-2.log")
    assert stop(proc, signal.SIGINT, timeout=30) == 0, (tmp_path / "up-2.log").read_text()
