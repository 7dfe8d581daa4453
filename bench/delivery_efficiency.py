"""Delivery efficiency: agentstream's stream consumer beside a naive one, in the same run.

    uv run python -m bench.delivery_efficiency                  # 20 streams, 8 s each
    uv run python -m bench.delivery_efficiency --streams 50 --seconds 10 --json

N concurrent model streams (`--rate` deltas per second each, `--seconds` long plus up to
2 s, spread over the streams so the last token falls at every phase of the cadence) are
delivered into a fake Telegram Bot API (real HTTP on 127.0.0.1) that enforces ~1 call
per second per chat with 429s carrying `parameters.retry_after`, exactly like the
platform's flood control. Two consumers run side by side, each against its own fake:

- **agentstream**: the delivery service's `StreamActor` (state machine, per-chat gate,
  ledger in memory, Telegram adapter) — the same code as in production, minus Kafka;
- **naive**: sends the first delta, then one `editMessageText` per delta with the whole
  text so far, waiting out each 429's `retry_after` before repeating the call.

Reported per consumer: API calls per delivered message, 429 answers, the time from
`run.finished` to the final text being visible (p50 / max, measured at the fake server),
and the share of chats whose final text is exactly the answer. Target: zero 429s at
nominal load, ≥ 10× fewer calls than the naive consumer, 100% exact finals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import cast

import httpx
import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget, RunStatus
from agentstream_delivery.adapters import PlatformAdapter, TelegramAdapter
from agentstream_delivery.formatting import render
from agentstream_delivery.ratelimit import RateLimiter
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_testing.fake_platforms import FakeTelegram

Consumer = Callable[[FakeTelegram, list[str], list[str], dict[str, float]], Awaitable[None]]


@dataclass
class ConsumerResult:
    name: str
    messages: int
    api_calls: int
    calls_per_message: float
    rate_limited: int
    final_p50_ms: float
    final_max_ms: float
    exact_finals_pct: float


def words(i: int, count: int) -> list[str]:
    return [f"w{i}.{k} " for k in range(count)]


def stream_length(i: int, streams: int, seconds: float, rate: float) -> int:
    """Words of stream `i`: `seconds` of deltas plus up to 2 s more, spread evenly over the streams,
    so the last tokens fall at every phase of the chats' call cadence (not all at the same one)."""
    return int(seconds * rate) + (i * int(2 * rate)) // max(streams, 1)


async def paced(chunks: list[str], rate: float, each: Callable[[str], Awaitable[None] | None]) -> None:
    start = time.monotonic()
    for k, chunk in enumerate(chunks):
        result = each(chunk)
        if result is not None:
            await result
        await asyncio.sleep(max(0.0, start + (k + 1) / rate - time.monotonic()))


async def agentstream_consumer(
    tg: FakeTelegram, chats: list[str], answers: list[str], finished: dict[str, float], rate: float = 20.0
) -> None:
    adapter = TelegramAdapter(tg.token, api_url=tg.url)
    # The same adapter as the protocol: its `platform` is a KnownPlatform, and mypy holds the protocol's
    # settable `str` attribute invariant.
    as_platform = cast(PlatformAdapter, adapter)
    limiter = RateLimiter()
    log = structlog.get_logger("bench")

    async def one(chat: str, text: str) -> None:
        target = ReplyTarget(platform="telegram", chat_id=chat)
        actor = StreamActor(
            StreamKey.of(f"run{chat}", target),
            target,
            as_platform,
            log,
            conversation_key=f"telegram:{chat}",
            gate=limiter.gate("telegram", adapter.bot, chat, adapter.capabilities.chat_interval),
        )
        task = actor.start()
        await paced(text.split(" ")[:-1], rate, lambda w: actor.feed(TextDelta("m1", w + " ")))
        finished[chat] = time.monotonic()
        actor.feed(Finish(RunStatus.COMPLETED, text=text))
        await task

    try:
        await asyncio.gather(*(one(c, a) for c, a in zip(chats, answers, strict=True)))
    finally:
        await adapter.close()


async def naive_consumer(
    tg: FakeTelegram, chats: list[str], answers: list[str], finished: dict[str, float], rate: float = 20.0
) -> None:
    async with httpx.AsyncClient(base_url=f"{tg.url}/bot{tg.token}", timeout=30) as http:

        async def call(method: str, body: dict[str, object]) -> dict[str, object]:
            while True:  # the naive way to respect flood control: wait it out, then repeat
                resp = await http.post(f"/{method}", json=body)
                data = resp.json()
                if resp.status_code != 429:
                    return data
                await asyncio.sleep(float(data["parameters"]["retry_after"]))

        async def one(chat: str, text: str) -> None:
            shown = ""
            message_id: object = None

            async def on_delta(word: str) -> None:
                nonlocal shown, message_id
                shown += word + " "
                if message_id is None:
                    message_id = (await call("sendMessage", {"chat_id": chat, "text": shown}))["result"]["message_id"]  # type: ignore[index]
                else:
                    await call("editMessageText", {"chat_id": chat, "message_id": message_id, "text": shown})

            await paced(text.split(" ")[:-1], rate, on_delta)
            finished[chat] = time.monotonic()
            if shown != text:
                await call("editMessageText", {"chat_id": chat, "message_id": message_id, "text": text})

        await asyncio.gather(*(one(c, a) for c, a in zip(chats, answers, strict=True)))


def as_sent(text: str) -> str:
    return text


def as_telegram_html(text: str) -> str:
    """What agentstream shows of an answer: its Markdown rendered as Telegram HTML."""
    return render(text, TextFormat.TELEGRAM_HTML)


async def measure(
    name: str, consumer: Consumer, streams: int, seconds: float, rate: float, shown: Callable[[str], str]
) -> ConsumerResult:
    chats = [f"-{100 + i}" for i in range(streams)]
    answers = ["".join(words(i, stream_length(i, streams, seconds, rate))) for i in range(streams)]
    finished: dict[str, float] = {}
    async with FakeTelegram(per_chat_interval=1.0, retry_after=1.0) as tg:
        await consumer(tg, chats, answers, finished, rate)  # type: ignore[call-arg]
        latencies, exact = [], 0
        for chat, answer in zip(chats, answers, strict=True):
            text = shown(answer)
            exact += tg.texts(chat) == [text]
            shown_at = [c.at for c in tg.calls_to(chat) if c.status == 200 and c.body.get("text") == text]
            if shown_at:
                latencies.append(max(0.0, shown_at[0] - finished[chat]) * 1000)
        messages = sum(len(tg.messages(c)) for c in chats)
        calls = len(tg.calls)
        return ConsumerResult(
            name=name,
            messages=messages,
            api_calls=calls,
            calls_per_message=round(calls / max(messages, 1), 2),
            rate_limited=tg.count(429),
            final_p50_ms=round(statistics.median(latencies), 1) if latencies else -1,
            final_max_ms=round(max(latencies), 1) if latencies else -1,
            exact_finals_pct=round(100.0 * exact / streams, 1),
        )


@dataclass(frozen=True)
class Comparison:
    streams: int
    seconds: float
    deltas_per_second: float
    agentstream: ConsumerResult
    naive: ConsumerResult

    @property
    def call_reduction(self) -> float:
        """How many times more API calls the naive consumer made."""
        return round(self.naive.api_calls / max(self.agentstream.api_calls, 1), 1)


async def compare(streams: int, seconds: float, rate: float) -> Comparison:
    """Both consumers, side by side in the same run, each against its own fake Telegram."""
    ours, naive = await asyncio.gather(
        measure("agentstream", agentstream_consumer, streams, seconds, rate, as_telegram_html),
        measure("naive", naive_consumer, streams, seconds, rate, as_sent),
    )
    return Comparison(streams, seconds, rate, ours, naive)


async def run(streams: int, seconds: float, rate: float) -> dict[str, object]:
    result = await compare(streams, seconds, rate)
    return {
        "streams": streams,
        "seconds": seconds,
        "deltas_per_second": rate,
        "agentstream": asdict(result.agentstream),
        "naive": asdict(result.naive),
        "call_reduction": result.call_reduction,
    }


def format_table(result: dict[str, object]) -> str:
    rows = [result["agentstream"], result["naive"]]
    cols = [
        "name",
        "messages",
        "api_calls",
        "calls_per_message",
        "rate_limited",
        "final_p50_ms",
        "final_max_ms",
        "exact_finals_pct",
    ]
    lines = ["  ".join(f"{c:>17}" for c in cols)]
    lines += ["  ".join(f"{str(r[c]):>17}" for c in cols) for r in rows]  # type: ignore[index]
    lines.append(
        f"naive / agentstream API calls: {result['call_reduction']}x "
        f"({result['streams']} streams, {result['seconds']} s, {result['deltas_per_second']} deltas/s)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=20.0, help="deltas per second per stream")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    result = asyncio.run(run(args.streams, args.seconds, args.rate))
    print(json.dumps(result) if args.json else format_table(result))


if __name__ == "__main__":
    main()
