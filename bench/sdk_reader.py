"""The bare SDK reading the model's chunk stream, and nothing else: the yardstick of the
runner's CPU per token (`bench.run_overhead` runs it beside each level, same model server,
same concurrency, same runs).

    python -m bench.sdk_reader http://127.0.0.1:PORT/v1 --concurrency 50 --runs 100 --tokens 100

Each of `--concurrency` clients asks for `--rounds` streamed answers one after the other,
their first requests spread over one answer's length, and reads every chunk through
`AsyncOpenAI.chat.completions.create(stream=True)` over the transport the runner uses by
default (aiohttp; `--transport httpx` for the SDK's own). `--reader connector` reads them
through the runner's own `OpenAIConnector.stream` instead (the SDK's request, the runner's
`ChunkStream`), and nothing else: what the runner pays before coalescing and Kafka. Prints one
JSON line: the process's CPU seconds while streaming (start-up excluded) and the tokens read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import openai

from agentstream.config import ConnectorSettings
from agentstream.config.runner import ConnectorType
from agentstream.contracts import ChatMessage, MessageRole
from agentstream_runner.connectors.base import LLMRequest, TextDelta
from agentstream_runner.connectors.openai_connector import OpenAIConnector

REPO_ROOT = Path(__file__).resolve().parents[1]


def _text(index: int, round_: int, tokens: int) -> str:
    # The lean model echoes the user text word by word: `tokens` words, `tokens` chunks.
    return " ".join([f"sdk{index}x{round_}", *(["token"] * (tokens - 1))])


async def read_streams(
    base_url: str,
    concurrency: int,
    rounds: int,
    tokens: int,
    rate: float,
    transport: Literal["aiohttp", "httpx"],
    reader: str = "sdk",
) -> tuple[float, int]:
    """(CPU seconds spent streaming, text chunks read)."""
    http_client = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
    client = openai.AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=0, http_client=http_client)
    connector = OpenAIConnector(
        ConnectorSettings(
            id="bench", type=ConnectorType.OPENAI, base_url=base_url, model="bench", http_client=transport
        )
    )
    spacing = tokens / rate / concurrency
    read = 0

    async def one(index: int, round_: int) -> None:
        nonlocal read
        if reader == "connector":
            message = ChatMessage(role=MessageRole.USER, content=_text(index, round_, tokens))
            async for piece in connector.stream(LLMRequest(messages=(message,))):
                if isinstance(piece, TextDelta):
                    read += 1
            return
        stream = await client.chat.completions.create(
            model="bench",
            messages=[{"role": "user", "content": _text(index, round_, tokens)}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    read += 1

    async def client_loop(index: int) -> None:
        await asyncio.sleep(index * spacing)
        for round_ in range(rounds):
            await one(index, round_)

    async with client:
        try:
            await one(-1, 0)  # warm-up: connection, imports on first use
            read = 0
            cpu = time.process_time()
            await asyncio.gather(*(client_loop(i) for i in range(concurrency)))
            return time.process_time() - cpu, read
        finally:
            await connector.aclose()


async def sdk_cpu_per_token(
    base_url: str, concurrency: int, rounds: int, tokens: int, rate: float, reader: str = "sdk"
) -> float:
    """µs of CPU per token of `bench.sdk_reader` (its own process, like the runner) at this level's load."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "bench.sdk_reader", base_url, "--concurrency", str(concurrency), "--rounds", str(rounds)),
        *("--tokens", str(tokens), "--rate", str(rate), "--reader", reader),
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"bench.sdk_reader failed (exit code {process.returncode})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    return float(result["cpu_s"]) / max(1, int(result["tokens"])) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sdk_reader", description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="answers each client reads one after the other")
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second per stream (the model's)")
    parser.add_argument("--transport", choices=("aiohttp", "httpx"), default="aiohttp")
    parser.add_argument("--reader", choices=("sdk", "connector"), default="sdk", help="the stock SDK, or the runner's")
    args = parser.parse_args(argv)
    cpu, read = asyncio.run(
        read_streams(args.base_url, args.concurrency, args.rounds, args.tokens, args.rate, args.transport, args.reader)
    )
    print(json.dumps({"cpu_s": cpu, "tokens": read}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
