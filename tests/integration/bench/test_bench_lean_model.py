"""The benchmark's lean model speaks the OpenAI streaming protocol to the real SDK, at its pace."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.lean_model import LeanModel  # noqa: E402


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_streams_the_echo_one_token_per_chunk_and_records_timings(transport: str) -> None:
    model = LeanModel(token_delay_s=0.01)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(model.serve(ready))
    base_url = await ready
    http_client = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, http_client=http_client)
    text = "r1 " + " ".join(["token"] * 19)
    try:
        for _ in range(2):  # twice: the second request reuses the kept-alive connection
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": text}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
            assert "".join(pieces) == text and len(pieces) == 20
            assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20
        async with httpx.AsyncClient() as http:
            timings = (await http.get(base_url.removesuffix("/v1") + "/_fake/requests")).json()["requests"]
    finally:
        await client.close()
        server.cancel()
    assert [t["user"] for t in timings] == [text, text]
    for t in timings:
        # 20 tokens 10 ms apart: paced, the last ~190 ms or more after the first (how much later is
        # the machine's load, measured in bench/, not here).
        assert t["last_token_at"] - t["first_token_at"] >= 0.18
        assert t["completed_at"] >= t["last_token_at"] and t["closed_at"] is None
