"""A tool-executor child process for chaos tests: `python -m tests.chaos.tool_executor_child PORT`.

Its calculator writes one line per execution to `CHAOS_TOOL_LOG` (a file, so the count
survives `kill -9`) and then sleeps `CHAOS_TOOL_DELAY_S` (a call held in flight). With
`CHAOS_MODE=hold_store` results are published but never stored; with
`CHAOS_MODE=no_commit` results are published and stored but offsets never committed: the
two points between "result published" and "offset committed" where a kill can land.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import replace
from typing import Any

from agentstream.config import load_settings
from agentstream.host import ServiceHost, install_stop_signals
from agentstream.observability import configure_logging
from agentstream_tools.bootstrap import bootstrap
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.registry import Tool, ToolRegistry

MODE = os.environ.get("CHAOS_MODE", "normal")


def counted(tool: Tool) -> Tool:
    log_path, delay = os.environ["CHAOS_TOOL_LOG"], float(os.environ.get("CHAOS_TOOL_DELAY_S", "0"))

    def log_execution(args: dict[str, Any]) -> None:
        with open(log_path, "a") as log:
            log.write(json.dumps(args) + "\n")
            log.flush()
            os.fsync(log.fileno())

    async def run(args: dict[str, Any]) -> str:
        log_execution(args)  # before the tool's work: a kill during it still counts the execution
        await asyncio.sleep(delay)
        return await tool.run(args)

    return replace(tool, run=run)


async def main(port: int) -> None:
    settings = load_settings()
    configure_logging(settings.log_level)
    stop = asyncio.Event()
    install_stop_signals(stop)
    tools = ToolRegistry(counted(t) if t.name == "calculator" else t for t in builtin_tools())
    svc = bootstrap(settings, tools=tools)
    committer = svc.requests.committer
    if MODE == "no_commit" and committer is not None:
        # Every commit goes through the consumer's committer: the round due 0.1 s after a call is
        # answered (`Consumer.done_at`) as well as the service's own. Overriding the service's
        # `commit` alone left that round, which landed before the kill when the test was slow to kill.

        async def never_committed() -> None:
            return None

        committer.commit = never_committed  # type: ignore[method-assign]
    if MODE == "hold_store":

        async def never_stored(*_: Any) -> None:
            await asyncio.Event().wait()  # published, never stored: the kill lands here

        svc.store.finish = never_stored  # type: ignore[method-assign]
    async with ServiceHost([svc], "127.0.0.1", {svc.name: port}):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
