"""`run_until_stopped`: a service process ends after its stop even when something left running
does not give way (a SIGTERM-ed runner hung on an aiokafka consumer left stopping after a broker
restart: asyncio.run waits on leftover tasks and threads without limit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        """
        import asyncio, threading, time
        from agentstream.host import run_until_stopped

        async def main():
        {body}
            return 7

        print("result", run_until_stopped(main()), flush=True)
        """
    ).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    # A process that hangs on its way out fails the test by this timeout.
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_a_task_that_swallows_its_cancel_does_not_hold_the_process() -> None:
    proc = _run(
        """
        async def stubborn():
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    pass
        asyncio.create_task(stubborn(), name="old-consumer-stop")
        await asyncio.sleep(0)
        """
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "result 7" in proc.stdout, out
    assert "tasks did not end on cancel" in out and "old-consumer-stop" in out, out
    assert "test_host_run" not in out and "<string>" in out, out  # where it waits: the stubborn loop


def test_a_thread_that_never_ends_does_not_hold_the_process() -> None:
    proc = _run(
        """
        release = threading.Event()
        asyncio.get_running_loop().run_in_executor(None, release.wait)
        await asyncio.sleep(0.1)
        """
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 7, out  # main's result as the exit code: the process ends without the thread
    assert "threads did not end" in out, out


def test_a_library_thread_that_never_ends_does_not_hold_the_process() -> None:
    """An aiosqlite connection's worker is a thread of its own (not the executor's), ended only when
    its engine is disposed: a stop abandoned at its backstop never got there, and the interpreter's
    exit joined the thread forever (the broker-restart chaos test's runner, still running 30 s after
    its SIGTERM)."""
    proc = _run(
        """
        release = threading.Event()
        threading.Thread(target=release.wait, name="sqlite-connection").start()
        await asyncio.sleep(0.1)
        """
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 7, out
    assert "threads did not end" in out and "sqlite-connection" in out, out


def test_a_library_thread_that_ends_soon_is_waited_for() -> None:
    proc = _run(
        """
        threading.Thread(target=time.sleep, args=(0.3,), name="closing-connection").start()
        """
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and proc.stdout.strip() == "result 7", out
    assert "did not end" not in out, out


def test_a_clean_end_is_quick_and_says_nothing() -> None:
    proc = _run(
        """
        async def polite():
            await asyncio.sleep(3600)
        asyncio.create_task(polite(), name="polite")
        await asyncio.to_thread(time.sleep, 0.01)
        """
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "result 7", proc.stdout + proc.stderr
    assert "did not end" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_an_exit_with_a_thread_left_keeps_its_exit_code() -> None:
    proc = _run(
        """
        release = threading.Event()
        asyncio.get_running_loop().run_in_executor(None, release.wait)
        raise SystemExit(3)  # a service's own exit (a broker that died, a config error)
        """
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
