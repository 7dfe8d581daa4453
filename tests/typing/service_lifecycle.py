"""Type-checked by mypy (`make lint`, and tests/unit/lib/test_service_runtime.py): `ServiceHost`
runs any object with the `Service` lifecycle (agentstream.service), a plain class holding its
`Runtime`, which inherits nothing; an object missing a step of the lifecycle is refused (each
refusal below carries a `type: ignore` that `--strict` would call unused if mypy accepted it)."""

from __future__ import annotations

from agentstream.host import ServiceHost
from agentstream.service import Runtime


class Composed:
    """What a service is: its runtime held, its own steps handed to the runtime's."""

    name = "composed"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.registry = runtime.registry
        self.http = runtime.http

    async def start(self) -> None:
        await self.runtime.start()

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s)

    async def stop(self) -> None:
        await self.runtime.stop()


class NoDrain:
    """Starts and stops, but a stop could not drain first."""

    name = "no-drain"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.registry = runtime.registry
        self.http = runtime.http

    async def start(self) -> None:
        await self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()


def hosts(runtime: Runtime) -> None:
    ServiceHost([Composed(runtime)], "127.0.0.1", {"composed": 8080})
    ServiceHost([NoDrain(runtime)], "127.0.0.1", {"no-drain": 8080})  # type: ignore[list-item]
