"""`bench.ingress_throughput --http`: the authenticated `POST /v1/messages` rate against the same
ingress without the credential check, in the same run. Target: >= 90%.

Two ingress processes started the same way (`bench/ingress_http_service.py`, which serves like
`agentstream serve ingress`), each on its own topics, both up for the whole run: one checks the
API key of every request as deployed (`Authenticator`, verified keys cached for
`auth.key_cache_s`), the other has `authenticate` overridden to return that key's principal. The
driver sends the same requests (same bodies, same `Authorization` header, same concurrency) to
one and then the other, alternating which goes first each round; the idle one only polls Kafka.
Each request is answered once its `InboundMessage` is stored on `inbound`, and the service's
consumer decides each record meanwhile (dedupe on PostgreSQL, allowlist), as in production.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from agentstream.auth import KeyStore, NewKey, Principal, Scope
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.kafka import create_topics
from bench.service_process import ServiceProcess

SERVICE_SCRIPT = str(Path(__file__).with_name("ingress_http_service.py"))
TARGET_RATIO = 0.90
WARMUP = 200


class Credential(StrEnum):
    GATEWAY = "gateway"  # an adapter's key relaying the bench users' messages (platform `bench`)
    MESSAGES_WRITE = "messages-write"  # a key posting as itself, one thread per chat


@dataclass(frozen=True)
class HttpRound:
    auth: bool
    requests: int
    seconds: float
    statuses: dict[int, int]
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.statuses.get(202, 0) / self.seconds if self.seconds else 0.0


@dataclass
class HttpResult:
    requests: int  # timed requests per round and side
    concurrency: int
    credential: str
    database: str
    rounds: list[HttpRound] = field(default_factory=list)

    def _side(self, auth: bool) -> list[HttpRound]:
        return [r for r in self.rounds if r.auth is auth]

    def rate(self, auth: bool) -> float:
        """Accepted requests per second over every round of one side."""
        side = self._side(auth)
        seconds = sum(r.seconds for r in side)
        return sum(r.statuses.get(202, 0) for r in side) / seconds if seconds else 0.0

    def cpu_us(self, auth: bool) -> float | None:
        """CPU of the ingress process per timed request (Linux `/proc`)."""
        side = self._side(auth)
        n = sum(r.requests for r in side)
        return sum(r.cpu_s for r in side) / n * 1e6 if n else None

    @property
    def ratio(self) -> float:
        plain = self.rate(False)
        return self.rate(True) / plain if plain else 0.0

    @property
    def failed(self) -> int:
        """Requests not answered 202 (any at all makes the figures meaningless)."""
        return sum(n for r in self.rounds for code, n in r.statuses.items() if code != 202)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "auth_rate": self.rate(True),
            "plain_rate": self.rate(False),
            "ratio": self.ratio,
            "auth_cpu_us": self.cpu_us(True),
            "plain_cpu_us": self.cpu_us(False),
            "failed": self.failed,
        }


def format_http_table(result: HttpResult) -> str:
    verdict = "ok" if result.ratio >= TARGET_RATIO else f"below the {TARGET_RATIO:.0%} target"
    per_side = len(result._side(True))

    def cpu(auth: bool) -> str:
        us = result.cpu_us(auth)
        return f" (ingress CPU {us:,.0f} us/request)" if us is not None else ""

    rows = [
        (
            "requests",
            f"{result.requests} per round x {per_side} rounds per side, concurrency {result.concurrency}, "
            f"{result.credential} key, {result.database}",
        ),
        ("with auth", f"{result.rate(True):,.0f} req/s{cpu(True)}"),
        ("without auth", f"{result.rate(False):,.0f} req/s{cpu(False)}"),
        ("ratio", f"{result.ratio:.0%} ({verdict})"),
    ]
    if result.failed:
        rows.append(("FAILED", f"{result.failed} requests not answered 202"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(["Ingress HTTP: POST /v1/messages", "-" * 48] + [f"{lbl:<{width}}  {v}" for lbl, v in rows])


async def make_key(db_url: str, credential: Credential) -> NewKey:
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        store = KeyStore(session_factory(engine))
        if credential is Credential.GATEWAY:
            return await store.create("bench gateway", {Scope.GATEWAY}, gateway_platforms=("bench",))
        return await store.create("bench writer", {Scope.MESSAGES_WRITE})
    finally:
        await engine.dispose()


def bodies(credential: Credential, users: list[str], tag: str, n: int) -> list[bytes]:
    """Built before the clock starts; ids unique per round and side (dedupe lets each through)."""
    out = []
    for i in range(n):
        body: dict[str, Any] = {"id": f"{tag}-{i}", "text": f"message {i}"}
        if credential is Credential.GATEWAY:
            body |= {"platform": "bench", "chat_id": f"chat-{i % 64}", "user": {"id": users[i % len(users)]}}
        else:
            body["thread_id"] = f"chat-{i % 64}"
        out.append(json.dumps(body).encode())
    return out


async def drive(
    url: str, token: str, payloads: list[bytes], concurrency: int, progress: Callable[[int], None] | None = None
) -> tuple[float, Counter[int]]:
    """Post every payload with at most `concurrency` requests in flight; (seconds, status counts).
    A request that got no answer (connection error) is counted under status 0."""
    statuses: Counter[int] = Counter()
    counter = itertools.count()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:

        async def worker() -> None:
            while (i := next(counter)) < len(payloads):
                try:
                    response = await client.post("/v1/messages", content=payloads[i])
                except httpx.TransportError as err:  # counted, and reported as a failure
                    print(f"  request {i}: {type(err).__name__} {err}", file=sys.stderr, flush=True)
                    statuses[0] += 1
                else:
                    statuses[response.status_code] += 1
                if progress is not None:
                    progress(sum(statuses.values()))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, statuses


def _progress(label: str, n: int) -> Callable[[int], None]:
    step = max(1, n // 5)

    def report(done: int) -> None:
        if done % step == 0 or done == n:
            print(f"  {label}: {done}/{n}", file=sys.stderr, flush=True)

    return report


@asynccontextmanager
async def _ingress(config: dict[str, Any], fixed: Principal | None) -> AsyncIterator[ServiceProcess]:
    command = [SERVICE_SCRIPT] + (["--fixed-principal", fixed.model_dump_json()] if fixed is not None else [])
    async with ServiceProcess("ingress", config, command=command, ready_timeout_s=180.0) as svc:
        yield svc


async def measure_http(
    settings_for: Callable[[list[str]], Any],
    db_url: str,
    users: list[str],
    *,
    requests: int = 2000,
    rounds: int = 2,
    concurrency: int = 32,
    credential: Credential = Credential.GATEWAY,
    warmup: int = WARMUP,
) -> HttpResult:
    """`settings_for(extra allowed users)` makes one ingress's settings (a fresh topic prefix each call)."""
    key = await make_key(db_url, credential)
    extra = [] if credential is Credential.GATEWAY else [f"key.{key.key_id}"]
    result = HttpResult(
        requests=requests, concurrency=concurrency, credential=credential.value, database=db_url.split("://", 1)[0]
    )
    sides = {True: settings_for(extra), False: settings_for(extra)}
    for settings in sides.values():
        await create_topics(settings.kafka)
    print(
        f"starting two ingress processes (with and without the credential check), {credential.value} key ...",
        file=sys.stderr,
    )
    async with AsyncExitStack() as stack:
        procs: dict[bool, ServiceProcess] = {}
        for auth, settings in sides.items():  # one after the other: two group joins at once can stall
            fixed = None if auth else key.principal
            procs[auth] = await stack.enter_async_context(_ingress(settings.model_dump(mode="json"), fixed))
        for auth, svc in procs.items():  # connections, key cache, pools and the consumer warm
            warm = bodies(credential, users, f"warm-{auth}", min(warmup, requests))
            _, statuses = await drive(svc.url, key.token, warm, concurrency)
            if set(statuses) != {202}:
                raise RuntimeError(f"warm-up answered {dict(statuses)}:\n{svc.log_tail()}")
        for n in range(rounds):
            for auth in (True, False) if n % 2 == 0 else (False, True):
                label = f"round {n + 1}/{rounds} {'with' if auth else 'without'} auth"
                payloads = bodies(credential, users, f"r{n}-{auth}", requests)
                cpu_before = procs[auth].cpu_seconds()
                seconds, statuses = await drive(
                    procs[auth].url, key.token, payloads, concurrency, _progress(label, requests)
                )
                done = HttpRound(
                    auth=auth,
                    requests=requests,
                    seconds=seconds,
                    statuses=dict(statuses),
                    cpu_s=procs[auth].cpu_seconds() - cpu_before,
                )
                result.rounds.append(done)
                print(f"  {label}: {done.rate:,.0f} req/s", file=sys.stderr, flush=True)
    return result
