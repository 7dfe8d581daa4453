"""An agent-runner child process for chaos tests: `python -m tests.chaos.runner_child PORT`.

The runner as `agentstream serve agent-runner` runs it, but its group's auto-commit is made rare
(`CHAOS_COMMIT_INTERVAL_MS`, default an hour): the `kill -9` of a test then always lands inside the
window in which a StartRun was read and not yet committed, which the real 100 ms interval makes
a matter of luck (docs/architecture.md, the commit table).
"""

from __future__ import annotations

import asyncio
import os
import sys

import agentstream_runner.app as runner_app
from agentstream.config import load_settings
from agentstream.host import ServiceHost, install_stop_signals
from agentstream.kafka.flavor import resolve_flavor
from agentstream.observability import configure_logging
from agentstream_runner.bootstrap import bootstrap


async def main(port: int) -> None:
    settings = load_settings()
    configure_logging(settings.log_level)
    runner_app.COMMIT_INTERVAL_MS = int(os.environ.get("CHAOS_COMMIT_INTERVAL_MS", "3600000"))
    stop = asyncio.Event()
    install_stop_signals(stop)
    svc = bootstrap(settings.model_copy(update={"kafka": await resolve_flavor(settings.kafka)}))
    async with ServiceHost([svc], "127.0.0.1", {svc.name: port}):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
