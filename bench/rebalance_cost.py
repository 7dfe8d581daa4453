"""What a rolling restart of 2 agent-runner replicas costs in rebalances, per membership setting,
on Apache Kafka (1 node on the JVM): `uv run python -m bench.rebalance_cost [--variants ...]`.

Two runners (bench/rebalance_runner.py: the runner with the variant's session timeout, heartbeat
and static `group.instance.id`) serve 4 `runs` partitions while long answers stream (a new
conversation every second, 7.5 s each) and a probe run goes to every partition every
`PROBE_INTERVAL_S` (its answer is one token, at once). Then the replicas are replaced one at a
time: "surge" as a Deployment rolls (the new pod starts, then the old one gets SIGTERM), "replace"
as a StatefulSet rolls (the pod stops, then starts again under the same name). Per variant:

- rebalances: the group's generations the broker completed during the roll (its log);
- rebalancing s: the time the group spent between "Preparing to rebalance" and "Stabilized";
- unowned partition-s: per partition, probes that waited over 1 s more than before the roll
  for their first token, times the probe interval, summed: the time new work found no owner;
- longest wait s: the longest a probe waited for its first token (new work's worst case);
- cut: long answers that did not end `completed` (must be 0: hand-over and drain).

The load on the machine is printed beside the figures; compare variants of the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from agentstream.config import load_settings
from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, User
from agentstream.kafka import create_topics, free_port
from agentstream.kafka.topics import consumer_group
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import ADMIN_TOKEN_ENV
from agentstream_testing.kafka_jvm import KafkaJvmCluster

PARTITIONS = 4
PROBE_INTERVAL_S = 0.5
STALL_S = 1.0  # a probe waiting this much longer than before the roll found its partition unowned
LONG_WORDS, LONG_TOKEN_DELAY_S = 30, 0.25
SETTLE_S = 10.0  # probes go on this long after the roll


@dataclass(frozen=True)
class Variant:
    name: str
    order: str  # "surge" (Deployment) or "replace" (StatefulSet)
    static: str = ""  # "" dynamic; "ordinal": runner-0/1 kept over restarts; "name": a new id per pod
    env: dict[str, str] = field(default_factory=dict)


VARIANTS = {
    v.name: v
    for v in (
        Variant("dynamic-now", "surge"),
        Variant(
            "dynamic-session-6s",
            "surge",
            env={"BENCH_SESSION_TIMEOUT_MS": "6000", "BENCH_HEARTBEAT_INTERVAL_MS": "2000"},
        ),
        Variant("static-statefulset", "replace", "ordinal", {"BENCH_SESSION_TIMEOUT_MS": "30000"}),
        Variant("static-deployment", "surge", "name", {"BENCH_SESSION_TIMEOUT_MS": "30000"}),
    )
}


class Runner:
    def __init__(self, env: dict[str, str], workdir: Path, tag: str, instance_id: str) -> None:
        self.port, self.log = free_port(), workdir / f"runner-{tag}.log"
        self.env = {**os.environ, **env, "AGENTSTREAM__AUTH__ADMIN_TOKEN_ENV": ADMIN_TOKEN_ENV}
        if instance_id:
            self.env["BENCH_GROUP_INSTANCE_ID"] = instance_id
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "bench.rebalance_runner", "serve", "agent-runner", "--port", str(self.port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def start(self) -> None:
        self.proc = self.spawn()
        async with httpx.AsyncClient(timeout=2) as http, asyncio.timeout(120):
            while True:
                assert self.proc.poll() is None, self.log.read_text()[-3000:]
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get(f"http://127.0.0.1:{self.port}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.2)

    async def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(self.proc.wait, 120)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Observer:
    """Each run's first token time and the long runs' endings, read from `events`."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="latest")
        self.first_token: dict[str, float] = {}
        self.endings: list[RunFinished] = []
        self.changed = asyncio.Event()

    async def run(self) -> None:
        async for record in self.consumer:
            value = record.value or b""
            if b'"message.delta"' in value or b'"run.finished"' in value:
                event = RunEventAdapter.validate_json(value)
                self.first_token.setdefault(event.run_id, time.monotonic())
                self.changed.set()
                if isinstance(event, RunFinished):
                    self.endings.append(event)


def start_run(run_id: str, key: str, text: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=key,
        assistant_id="default",
        user=User(id="u"),
        text=text,
        reply_target=ReplyTarget(platform="web", chat_id=key),
    )


def asking(text: str) -> Callable[[dict[str, Any]], bool]:
    """A model request whose last message is `text`."""
    return lambda body: bool(body["messages"][-1]["content"] == text)


LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def group_log(log: Path, group: str, since: float) -> Iterator[tuple[float, str]]:
    """(epoch seconds, line) of the broker log lines about `group` from `since` on."""
    for line in log.read_text(errors="replace").splitlines():
        if group in line and (m := LOG_LINE.match(line)):
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if at >= since:
                yield at, line


def rebalance_figures(log: Path, group: str, since: float) -> tuple[int, float]:
    stabilized, spent, preparing = 0, 0.0, None
    for at, line in group_log(log, group, since):
        if "Preparing to rebalance" in line and preparing is None:
            preparing = at
        elif "Stabilized group" in line:
            stabilized += 1
            if preparing is not None:
                spent += at - preparing
                preparing = None
    return stabilized, spent


async def measure(variant: Variant, bootstrap: str, broker_log: Path, workdir: Path) -> dict[str, Any]:
    prefix = f"rb{uuid.uuid4().hex[:6]}."
    async with FakeOpenAI(echo_token_delay_s=LONG_TOKEN_DELAY_S) as fake:
        settings = load_settings(
            kafka={"bootstrap_servers": bootstrap, "topic_prefix": prefix, "partitions": PARTITIONS, "flavor": "kafka"},
            database={"url": f"sqlite+aiosqlite:///{workdir / (prefix + 'db')}"},
        )
        await create_topics(settings.kafka)
        connectors = f'[{{"id":"fake","type":"openai","base_url":"{fake.base_url}","model":"fake-model"}}]'
        env = {
            "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "AGENTSTREAM__KAFKA__TOPIC_PREFIX": prefix,
            "AGENTSTREAM__KAFKA__PARTITIONS": str(PARTITIONS),
            "AGENTSTREAM__KAFKA__FLAVOR": "kafka",
            "AGENTSTREAM__DATABASE__URL": settings.database.url,
            "AGENTSTREAM__CONNECTORS": connectors,
            "AGENTSTREAM__DEFAULT_CONNECTOR": "fake",
            "AGENTSTREAM__SHUTDOWN__GRACE_S": "30",
            "AGENTSTREAM__LOG_LEVEL": "WARNING",
            **variant.env,
        }

        def instance(ordinal: int, generation: int) -> str:
            return {"": "", "ordinal": f"runner-{ordinal}", "name": f"runner-{generation}-{ordinal}"}[variant.static]

        runners = [Runner(env, workdir, f"{prefix}{i}", instance(i, 0)) for i in range(2)]
        observer = Observer(bootstrap, f"{prefix}events")
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        await asyncio.gather(observer.consumer.start(), producer.start(), *(r.start() for r in runners))
        reading = asyncio.create_task(observer.run())
        sent: list[tuple[str, int, float]] = []  # probe run id, partition, when sent
        long_runs: list[str] = []
        stop_traffic = asyncio.Event()

        async def probes() -> None:
            n = 0
            while not stop_traffic.is_set():
                for p in range(PARTITIONS):
                    n += 1
                    run_id, text = f"probe-{n}", f"probe {n}"
                    fake.add_turn(text="pong", when=asking(text))
                    sent.append((run_id, p, time.monotonic()))
                    await producer.send(
                        f"{prefix}runs",
                        start_run(run_id, f"web:{run_id}", text).to_json(),
                        key=run_id.encode(),
                        partition=p,
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_traffic.wait(), PROBE_INTERVAL_S)

        async def long_answers() -> None:
            n = 0
            while not stop_traffic.is_set():
                n += 1
                run_id = f"long-{n}"
                long_runs.append(run_id)
                text = " ".join(f"l{n}w{j}" for j in range(LONG_WORDS))
                await producer.send(
                    f"{prefix}runs", start_run(run_id, f"web:{run_id}", text).to_json(), key=run_id.encode()
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_traffic.wait(), 1.0)

        traffic = [asyncio.create_task(probes()), asyncio.create_task(long_answers())]
        try:
            await asyncio.sleep(8.0)  # the probes' baseline; long answers streaming on both runners
            roll_at, roll_wall = time.monotonic(), time.time()
            for i in range(2):
                new = Runner(env, workdir, f"{prefix}new{i}", instance(i, 1))
                if variant.order == "surge":
                    await new.start()
                    await runners[i].stop()
                else:
                    await runners[i].stop()
                    await new.start()
                runners.append(new)
            rolled = time.monotonic()
            await asyncio.sleep(SETTLE_S)
            stop_traffic.set()
            await asyncio.gather(*traffic)
            async with asyncio.timeout(120):  # every probe and long answer through
                while not (
                    all(r in observer.first_token for r, _, _ in sent)
                    and len({e.run_id for e in observer.endings if e.run_id in set(long_runs)}) == len(long_runs)
                ):
                    observer.changed.clear()
                    await observer.changed.wait()
        finally:
            for r in runners:
                r.kill()
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            await observer.consumer.stop()
            await producer.stop()
    waits = [(p, at, observer.first_token[r] - at) for r, p, at in sent]
    base = statistics.median(w for _, at, w in waits if at < roll_at)
    during = [(p, w) for p, at, w in waits if at >= roll_at]
    stabilized, spent = rebalance_figures(broker_log, consumer_group(settings.kafka, "agent-runner"), roll_wall)
    ends = {e.run_id: e for e in observer.endings if e.run_id in set(long_runs)}
    return {
        "variant": variant.name,
        "roll s": round(rolled - roll_at, 1),
        "rebalances": stabilized,
        "rebalancing s": round(spent, 1),
        "unowned partition-s": round(sum(PROBE_INTERVAL_S for _, w in during if w > base + STALL_S), 1),
        "longest wait s": round(max(w for _, w in during), 1),
        "probe p50 before s": round(base, 2),
        "long answers": len(long_runs),
        "cut": sum(1 for e in ends.values() if e.status != "completed"),
    }


async def measure_variants(names: list[str]) -> list[dict[str, Any]]:
    """One row of figures per variant, each rolled on the same 1-node Apache Kafka (its own, on the JVM:
    the rebalances are read from the broker's log)."""
    with tempfile.TemporaryDirectory() as tmp, KafkaJvmCluster(nodes=1, workdir=Path(tmp)) as cluster:
        return [
            await measure(VARIANTS[n], cluster.bootstrap_servers, cluster.nodes[0].log_file, Path(tmp)) for n in names
        ]


async def main(names: list[str]) -> None:
    load = os.getloadavg()
    rows = await measure_variants(names)
    print(f"Apache Kafka (1 node, JVM); load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance_cost")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    asyncio.run(main(parser.parse_args().variants))
