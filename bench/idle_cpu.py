"""Idle CPU of the embedded stack, and first-token latency right after an idle spell.

    uv run python -m bench.idle_cpu                     # 20 s idle, 5 warm and 5 after-idle messages
    uv run python -m bench.idle_cpu --idle-s 5 --messages 2 --gap-s 3 --json

Starts `agentstream up --no-chat` (the embedded Tansu broker, SQLite and the five services in
one process, the scripted demo model) as a child process in a scratch directory, waits until
every service answers `/readyz`, lets it settle, then:

1. **idle CPU**: user + system CPU seconds of the stack process and of its broker process
   (Linux `/proc/<pid>/stat`) over `--idle-s` seconds with no client connected, reported as
   % of one core (target: <= 5 % in total);
2. **first token**: `InboundMessage`s produced to `inbound` the way `agentstream send` does
   (a plain Kafka client in this process), each timed from the produce to the run's first
   `message.delta` read back from `events`: `--messages` sent back to back (*warm*: records
   have just flowed) and `--messages` each sent after `--gap-s` seconds of silence
   (*after idle*). Both are printed with p50 / max; the target is after idle ~ warm.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from agentstream.config import SERVICES, KafkaSettings
from agentstream.contracts import InboundMessage, User
from agentstream.contracts import events as ev
from agentstream.kafka import free_port

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.kafka_baseline import percentile  # noqa: E402
from bench.service_process import child_env, cpu_seconds, log_tail, terminate  # noqa: E402

TARGET_IDLE_SHARE = 0.05  # of one core, the whole stack
SETTLE_S = 3.0  # after ready: group joins and first fetches finish
WARMUP_MESSAGES = 2


class StackProcess:
    """`agentstream up --no-chat` in a scratch directory, on free ports."""

    def __init__(self, ready_timeout_s: float = 90.0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agentstream-bench-idle-"))
        self.ports = {name: free_port() for name in SERVICES}
        self.ready_timeout_s = ready_timeout_s
        self.log_path = self.dir / "stack.log"
        self.process: asyncio.subprocess.Process | None = None
        self.state: dict[str, Any] = {}

    async def __aenter__(self) -> StackProcess:
        config = {
            "log_level": "WARNING",
            "database": {"url": f"sqlite+aiosqlite:///{self.dir}/stack.db"},
            "http": {"host": "127.0.0.1", **{name.replace("-", "_"): port for name, port in self.ports.items()}},
        }
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config))
        env = child_env()
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agentstream_stack",
                "up",
                "--no-chat",
                "--config",
                str(self.dir / "config.yaml"),
                cwd=self.dir,
                stdout=log,
                stderr=log,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
            )
        try:
            await self._wait_ready()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        state_file = self.dir / ".agentstream" / "stack.json"
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.returncode is not None:
                    raise RuntimeError(f"agentstream up exited with {self.process.returncode}:\n{self.log_tail()}")
                if state_file.exists():
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        self.state = json.loads(state_file.read_text())
                        codes = [(await http.get(f"{u}/readyz")).status_code for u in self.urls()]
                        if all(code == 200 for code in codes):
                            return
                await asyncio.sleep(0.2)
        raise TimeoutError(f"the stack was not ready after {self.ready_timeout_s:.0f} s:\n{self.log_tail()}")

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports.values()]

    def pids(self) -> list[int]:
        assert self.process is not None
        return [self.process.pid, *([self.state["broker_pid"]] if self.state.get("broker_pid") else [])]

    def cpu_seconds(self) -> dict[int, float]:
        return {pid: cpu_seconds(pid) for pid in self.pids()}

    def kafka(self) -> KafkaSettings:
        return KafkaSettings(
            bootstrap_servers=self.state["kafka"], topic_prefix=self.state["topic_prefix"], in_memory=True
        )

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    async def __aexit__(self, *exc: object) -> None:
        process, self.process = self.process, None
        if process is not None:
            await terminate(process, 20)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass(frozen=True)
class IdleResult:
    idle_s: float
    stack_cpu_s: float
    broker_cpu_s: float
    warm_first_ms: list[float]
    after_idle_first_ms: list[float]
    gap_s: float

    @property
    def stack_share(self) -> float:
        return self.stack_cpu_s / self.idle_s

    @property
    def broker_share(self) -> float:
        return self.broker_cpu_s / self.idle_s

    @property
    def total_share(self) -> float:
        return self.stack_share + self.broker_share

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "stack_share": self.stack_share,
            "broker_share": self.broker_share,
            "total_share": self.total_share,
            "target_share": TARGET_IDLE_SHARE,
            "warm_first_p50_ms": percentile(self.warm_first_ms, 50),
            "after_idle_first_p50_ms": percentile(self.after_idle_first_ms, 50),
        }


async def first_token_ms(kafka: KafkaSettings, timeout_s: float = 60.0) -> float:
    """Produce one message as `agentstream send` does; ms until its run's first `message.delta`."""
    from agentstream_stack.run_follower import RunFollower  # the CLI's own client, imported late

    message = InboundMessage(
        id=str(uuid.uuid4()),
        platform="memory",
        chat_id=f"idle-{uuid.uuid4().hex[:8]}",
        user=User(id="bench"),
        text="hi",
    )
    async with RunFollower(kafka) as follower:
        sent_at = time.monotonic()
        await follower.send(message)
        async with asyncio.timeout(timeout_s):
            async for event in follower.follow(message):
                if isinstance(event, ev.MessageDelta):
                    return (time.monotonic() - sent_at) * 1000
                if isinstance(event, ev.RunFinished):
                    break
    raise RuntimeError("the run finished without a message.delta")


async def measure(idle_s: float, messages: int, gap_s: float, progress: Any = None) -> IdleResult:
    say = progress or (lambda _msg: None)
    async with StackProcess() as stack:
        say(f"stack up (pids {stack.pids()}); settling {SETTLE_S:.0f} s")
        await asyncio.sleep(SETTLE_S)
        kafka = stack.kafka()
        for _ in range(WARMUP_MESSAGES):  # the first runs pay for imports, caches, a new conversation
            await first_token_ms(kafka)
        say(f"idle for {idle_s:.0f} s")
        before, t0 = stack.cpu_seconds(), time.monotonic()
        await asyncio.sleep(idle_s)
        after, elapsed = stack.cpu_seconds(), time.monotonic() - t0
        used = {pid: after[pid] - before[pid] for pid in after}
        pids = stack.pids()
        after_idle = [await first_token_ms(kafka)]  # the stack has been idle for `idle_s`
        warm: list[float] = []
        for _ in range(messages):
            warm.append(await first_token_ms(kafka))
        say(f"warm first tokens {[round(v) for v in warm]} ms; now {messages - 1} more after {gap_s:.0f} s gaps")
        for _ in range(messages - 1):
            await asyncio.sleep(gap_s)
            after_idle.append(await first_token_ms(kafka))
        return IdleResult(
            idle_s=elapsed,
            stack_cpu_s=used[pids[0]],
            broker_cpu_s=sum(v for pid, v in used.items() if pid != pids[0]),
            warm_first_ms=warm,
            after_idle_first_ms=after_idle,
            gap_s=gap_s,
        )


def report(result: IdleResult) -> str:
    warm, idle = result.warm_first_ms, result.after_idle_first_ms
    lines = [
        "Idle embedded stack (agentstream up: Tansu + 5 services, SQLite, demo model)",
        "-" * 76,
        f"idle window        {result.idle_s:.1f} s",
        f"stack process      {result.stack_share:6.1%} of one core",
        f"broker process     {result.broker_share:6.1%} of one core",
        f"total              {result.total_share:6.1%} of one core (target <= {TARGET_IDLE_SHARE:.0%})",
        f"first token warm   p50 {percentile(warm, 50):6.1f} ms  max {max(warm):6.1f} ms  ({len(warm)} messages)",
        f"first token idle   p50 {percentile(idle, 50):6.1f} ms  max {max(idle):6.1f} ms  "
        f"({len(idle)} messages, after >= {result.gap_s:.0f} s idle)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-s", type=float, default=20.0, help="seconds of idle CPU measured")
    parser.add_argument("--messages", type=int, default=5, help="messages warm, and as many after idle")
    parser.add_argument("--gap-s", type=float, default=5.0, help="silence before each after-idle message")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error("--messages must be >= 1")
    result = asyncio.run(
        measure(args.idle_s, args.messages, args.gap_s, progress=lambda m: print(m, file=sys.stderr, flush=True))
    )
    print(json.dumps(result.as_dict()) if args.json else report(result))


if __name__ == "__main__":
    main()
