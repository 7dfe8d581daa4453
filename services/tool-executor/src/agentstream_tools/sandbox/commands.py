"""Running one command in a workspace: rlimits, wall timeout, isolation, capped output.

The command line is `prlimit <limits> -- unshare ... sh -c <setup> sh <command>`:
- `prlimit` sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE and RLIMIT_NPROC (inherited by everything
  the command starts);
- when the executor is root the process runs as `run_as_uid` (never the executor's own uid, and
  RLIMIT_NPROC does not apply to root);
- `unshare` and the set-up (isolation.py) give it no network, a private read-only root with only
  `visible_paths` of the host, locked mounts, no capabilities, and every process it started
  killed with it. Without it (only with `allow_weak_isolation`) the command runs as it is.
The process gets a session of its own; on the wall timeout (or when the call is cancelled) the
whole group is killed. Output (stdout and stderr together) is read to the end but kept only up
to `output_max_chars`. See docs/tools.md for what this guarantees and how it is tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from agentstream.config.tools import SandboxSettings
from agentstream_tools.sandbox.isolation import MOUNTED_WORKSPACE, PATH, Isolation, isolated_argv, sandbox_uid
from agentstream_tools.sandbox.workspace import truncated

READ_CHUNK = 65536
# Past the wall timeout the command is already killed; this only bounds the cleanup.
TIMEOUT_MARGIN_S = 5.0


def _exit_text(code: int, settings: SandboxSettings) -> str:
    """`exit status N`, naming the signal when N says one ended the command (negative, or 128 + n
    from a shell)."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        name = signal.Signals(number).name if number else None
    except ValueError:
        name = None
    if name is None:
        return f"exit status {code}"
    why = {
        "SIGXCPU": f": CPU limit of {settings.cpu_s} s",
        "SIGXFSZ": f": file size limit of {settings.file_size_mb} MB",
    }
    return f"exit status {code} ({name}{why.get(name, '')})"


class CommandRunner:
    def __init__(self, settings: SandboxSettings, isolation: Isolation) -> None:
        self.settings = settings
        self.isolation = isolation

    def argv(self, command: list[str]) -> list[str]:
        s = self.settings
        nproc = s.max_processes + (0 if sandbox_uid(s) is not None else _processes_of_this_user())
        argv = isolated_argv(s, command) if self.isolation.namespaces else command
        if self.isolation.limits:
            limits = [
                f"--cpu={s.cpu_s}:{s.cpu_s + 1}",  # SIGXCPU at the limit, SIGKILL a second later
                f"--as={s.memory_mb * 1024 * 1024}",
                f"--fsize={s.file_size_mb * 1024 * 1024}",
                f"--nproc={nproc}",
            ]
            argv = ["prlimit", *limits, "--", *argv]
        return argv

    async def run(self, workspace: Path, command: list[str]) -> str:
        """The command's exit status and output (cut with a marker), or how it was stopped."""
        s = self.settings
        uid = sandbox_uid(s)
        home = MOUNTED_WORKSPACE if self.isolation.namespaces else str(workspace)
        proc = await asyncio.create_subprocess_exec(
            *self.argv(command),
            cwd=workspace,
            env={"PATH": PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            user=uid,
            group=uid,
            extra_groups=[] if uid is not None else None,
        )
        kept, total = bytearray(), 0
        limit = s.output_max_chars * 4 + 4

        async def read_all() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(READ_CHUNK):
                total += len(chunk)
                if len(kept) < limit:
                    kept.extend(chunk[: limit - len(kept)])
            await proc.wait()

        status: str
        try:
            async with asyncio.timeout(s.wall_timeout_s):
                await read_all()
            assert proc.returncode is not None
            status = _exit_text(proc.returncode, s)
        except TimeoutError:
            status = f"killed: still running after the wall timeout of {s.wall_timeout_s:g} s"
        finally:  # also when the call is cancelled: nothing it started outlives it
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            # Read on to the end of the pipe: a full, paused pipe would keep wait() from returning.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TIMEOUT_MARGIN_S):
                    assert proc.stdout is not None
                    while await proc.stdout.read(READ_CHUNK):
                        pass
                    await proc.wait()
        output = truncated(kept.decode("utf-8", errors="replace"), s.output_max_chars, f"{total} bytes")
        return f"{status}\n{output}" if output else status


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _processes_of_this_user() -> int:
    """Tasks this uid already runs: RLIMIT_NPROC counts them all, so the sandbox's share is added."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count
