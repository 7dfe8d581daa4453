"""Streams per delivery core: the most concurrent streams one delivery process carries, Telegram HTML beside passthrough.

    uv run python -m bench.stream_capacity                       # search upwards from 20 streams, 8 s each
    uv run python -m bench.stream_capacity --levels 10 20 40 --seconds 6 --json

Each level N runs one delivery process (a child: `python -m bench.stream_capacity --child`)
holding N concurrent streams, each a Markdown answer fed at `--rate` deltas per second of
20 characters, through the delivery service's own parts (`StreamActor`: the stream state
machine, the per-chat gate, the Telegram adapter; the ledger in memory and no Kafka, as in
`bench.delivery_efficiency`). The chats are a fake Telegram Bot API in this (parent) process,
real HTTP on 127.0.0.1, at the platform's flood control (1 call per second per chat, a 429
with `retry_after` beyond). A level is carried when the final text's p50 (from the stream's
end to the fake showing it) is ≤ 0.8 s and no call got a 429. The levels double from the
first until one is not carried; then `--refine` bisection steps narrow the capacity.

Reported per markup (Telegram HTML, then the Markdown passed through, in the same run):
the largest N carried, and the delivery process's CPU per delta (all of it: the state
machine, rendering, HTTP calls, the feeding loop) at each level.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import cast

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget, RunStatus
from agentstream_delivery.adapters import PlatformAdapter, TelegramAdapter
from agentstream_delivery.formatting import render
from agentstream_delivery.ratelimit import RateLimiter
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_testing.fake_platforms import FakeTelegram
from bench.formatting import answer

TARGET_P50_MS = 800.0
DELTA_CHARS = 20
STAGGER_S = 2.0  # the streams' starts spread over this long
ROOT = Path(__file__).resolve().parent.parent


def chats(streams: int) -> list[str]:
    return [f"-{1000 + i}" for i in range(streams)]  # groups: no drafts, every frame is a message edit


def spread(i: int) -> float:
    """Stream `i`'s place in [0, 1), evenly spread and unrelated to its neighbours' (the golden ratio's steps)."""
    return (i * 0.6180339887) % 1.0


def answers(streams: int, seconds: float, rate: float) -> list[str]:
    """One answer per stream, each its own text (nothing one renders helps another): `seconds` of deltas
    plus up to 1 s more, so the ends fall at every phase of the chats' call cadence (and, at 20 deltas/s
    for 8 s, one Telegram message holds each)."""
    return [answer(int((seconds + spread(i)) * rate) * DELTA_CHARS, salt=f".{i}") for i in range(streams)]


# -- the delivery process -------------------------------------------------------------
async def deliver(
    url: str, token: str, fmt: TextFormat, streams: int, seconds: float, rate: float
) -> dict[str, object]:
    adapter = TelegramAdapter(token, api_url=url)
    # The same adapter as the protocol: its `platform` is a KnownPlatform, and mypy holds the protocol's
    # settable `str` attribute invariant.
    as_platform = cast(PlatformAdapter, adapter)
    adapter.capabilities = replace(adapter.capabilities, formatting=fmt)  # type: ignore[misc]
    limiter = RateLimiter()
    log = structlog.get_logger("bench")
    finished: dict[str, float] = {}
    fed = 0

    async def one(i: int, chat: str, text: str) -> None:
        nonlocal fed
        target = ReplyTarget(platform="telegram", chat_id=chat)
        actor = StreamActor(
            StreamKey.of(f"run{chat}", target),
            target,
            as_platform,
            log,
            conversation_key=f"telegram:{chat}",
            gate=limiter.gate("telegram", adapter.bot, chat, adapter.capabilities.chat_interval),
        )
        await asyncio.sleep(STAGGER_S * spread(i + 7))  # streams do not all start at once
        task = actor.start()
        start = time.monotonic()
        for k in range(0, len(text), DELTA_CHARS):
            actor.feed(TextDelta("m1", text[k : k + DELTA_CHARS]))
            fed += 1
            await asyncio.sleep(max(0.0, start + (k // DELTA_CHARS + 1) / rate - time.monotonic()))
        finished[chat] = time.monotonic()
        actor.feed(Finish(RunStatus.COMPLETED, text=text))
        await task

    cpu, wall = time.process_time(), time.monotonic()
    try:
        texts = answers(streams, seconds, rate)
        await asyncio.gather(*(one(i, c, a) for i, (c, a) in enumerate(zip(chats(streams), texts, strict=True))))
    finally:
        await adapter.close()
    return {"finished": finished, "cpu_s": time.process_time() - cpu, "wall_s": time.monotonic() - wall, "deltas": fed}


def child_main(args: argparse.Namespace) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    out = asyncio.run(deliver(args.url, args.token, TextFormat(args.format), args.streams, args.seconds, args.rate))
    print(json.dumps(out))


# -- one level, measured at the fake ---------------------------------------------------
@dataclass(frozen=True)
class Level:
    streams: int
    final_p50_ms: float
    final_max_ms: float
    rate_limited: int
    exact_finals_pct: float
    cpu_us_per_delta: float
    cpu_share: float  # of one core, over the time the streams ran

    @property
    def carried(self) -> bool:
        """Every final shown, exactly, its p50 within the target, no 429: a level whose finals never
        came has no latency to judge, and is not carried."""
        return self.exact_finals_pct == 100.0 and self.final_p50_ms <= TARGET_P50_MS and self.rate_limited == 0


async def run_level(fmt: TextFormat, streams: int, seconds: float, rate: float) -> Level:
    async with FakeTelegram(per_chat_interval=1.0, retry_after=1.0) as tg:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.stream_capacity", "--child", "--url", tg.url, "--token", tg.token,
            "--format", fmt.value, "--streams", str(streams), "--seconds", str(seconds), "--rate", str(rate),
            cwd=ROOT, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        stdout, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"the delivery process exited with {proc.returncode}")
        out = json.loads(stdout.decode().strip().splitlines()[-1])
        latencies, exact = [], 0
        for chat, text in zip(chats(streams), answers(streams, seconds, rate), strict=True):
            final = render(text, fmt)
            if tg.texts(chat) != [final]:  # not shown (yet): the time of an earlier frame is no final's
                continue
            exact += 1
            shown = [c.at for c in tg.calls_to(chat) if c.status == 200]  # the last: the final text
            if shown and chat in out["finished"]:
                latencies.append(max(0.0, shown[-1] - out["finished"][chat]) * 1000)
        return Level(
            streams=streams,
            final_p50_ms=round(statistics.median(latencies), 1) if latencies else float("inf"),
            final_max_ms=round(max(latencies), 1) if latencies else float("inf"),
            rate_limited=tg.count(429),
            exact_finals_pct=round(100.0 * exact / streams, 1),
            cpu_us_per_delta=round(out["cpu_s"] / max(out["deltas"], 1) * 1e6, 1),
            cpu_share=round(out["cpu_s"] / max(out["wall_s"], 0.001), 3),
        )


@dataclass
class Capacity:
    markup: str
    levels: list[Level] = field(default_factory=list)

    @property
    def streams(self) -> int:
        """The largest level carried (0: not even the first)."""
        return max((lv.streams for lv in self.levels if lv.carried), default=0)

    @property
    def cpu_us_per_delta(self) -> float:
        """At the largest level carried (else the first level)."""
        carried = [lv for lv in self.levels if lv.carried]
        best = max(carried, key=lambda lv: lv.streams) if carried else self.levels[0]
        return best.cpu_us_per_delta

    def streams_per_core(self, rate: float) -> int:
        """Streams a whole core would carry at this CPU per delta: the capacity a loaded machine hides
        (each process there gets its share of the cores, not a core)."""
        return int(1e6 / max(self.cpu_us_per_delta * rate, 0.001))


async def search(fmt: TextFormat, first: int, seconds: float, rate: float, refine: int, ceiling: int) -> Capacity:
    """Double from `first` until a level is not carried, then bisect `refine` times."""
    cap = Capacity(fmt.value)
    n, carried, failed = first, 0, 0
    while n <= ceiling:
        lv = await run_level(fmt, n, seconds, rate)
        cap.levels.append(lv)
        print(f"  {fmt.value:>14} {n:>4} streams: {_line(lv)}", file=sys.stderr)
        if not lv.carried:
            failed = n
            break
        carried, n = n, n * 2
    for _ in range(refine if failed else 0):
        mid = (carried + failed) // 2
        if mid in (carried, failed):
            break
        lv = await run_level(fmt, mid, seconds, rate)
        cap.levels.append(lv)
        print(f"  {fmt.value:>14} {mid:>4} streams: {_line(lv)}", file=sys.stderr)
        carried, failed = (mid, failed) if lv.carried else (carried, mid)
    return cap


async def run_levels(fmt: TextFormat, levels: list[int], seconds: float, rate: float) -> Capacity:
    cap = Capacity(fmt.value)
    for n in levels:
        lv = await run_level(fmt, n, seconds, rate)
        cap.levels.append(lv)
        print(f"  {fmt.value:>14} {n:>4} streams: {_line(lv)}", file=sys.stderr)
    return cap


def _line(lv: Level) -> str:
    return (
        f"final p50 {lv.final_p50_ms:.0f} ms (max {lv.final_max_ms:.0f}), {lv.rate_limited} × 429, "
        f"{lv.exact_finals_pct:.0f}% exact, {lv.cpu_us_per_delta:.0f} µs CPU per delta, "
        f"{lv.cpu_share:.0%} of a core: {'carried' if lv.carried else 'NOT carried'}"
    )


@dataclass(frozen=True)
class CapacityResult:
    seconds: float
    deltas_per_second: float
    telegram_html: Capacity
    passthrough: Capacity

    @property
    def cpu_ratio(self) -> float:
        """CPU per delta, Telegram HTML over Markdown passed through, each at its own capacity."""
        return self.telegram_html.cpu_us_per_delta / max(self.passthrough.cpu_us_per_delta, 0.001)


async def measure(
    *, first: int = 20, levels: list[int] | None = None, seconds: float = 8.0, rate: float = 20.0, refine: int = 2,
    ceiling: int = 2000,
) -> CapacityResult:  # fmt: skip
    async def one(fmt: TextFormat) -> Capacity:
        if levels:
            return await run_levels(fmt, levels, seconds, rate)
        return await search(fmt, first, seconds, rate, refine, ceiling)

    html = await one(TextFormat.TELEGRAM_HTML)
    passthrough = await one(TextFormat.MARKDOWN)
    return CapacityResult(seconds, rate, html, passthrough)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--format", default=TextFormat.TELEGRAM_HTML.value, help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=20, help="the first level of the search (streams)")
    parser.add_argument("--levels", type=int, nargs="*", help="these levels only, no search")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds of deltas per stream")
    parser.add_argument("--rate", type=float, default=20.0, help="deltas per second per stream")
    parser.add_argument("--refine", type=int, default=2, help="bisection steps after the first level not carried")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} cores", file=sys.stderr)
    result = asyncio.run(
        measure(first=args.first, levels=args.levels, seconds=args.seconds, rate=args.rate, refine=args.refine)
    )
    if args.json:
        per_core = {c.markup: c.streams_per_core(args.rate) for c in (result.telegram_html, result.passthrough)}
        print(json.dumps({**asdict(result), "cpu_ratio": round(result.cpu_ratio, 2), "streams_per_core": per_core}))
        return
    for cap in (result.telegram_html, result.passthrough):
        print(
            f"{cap.markup:>14}: {cap.streams} streams carried (final p50 ≤ {TARGET_P50_MS:.0f} ms, 0 × 429), "
            f"{cap.cpu_us_per_delta:.0f} µs CPU per delta (a whole core: ~{cap.streams_per_core(args.rate)} streams)"
        )
    print(f"CPU per delta, Telegram HTML / passthrough: {result.cpu_ratio:.1f}x")


if __name__ == "__main__":
    main()
