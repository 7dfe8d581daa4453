"""The ingress service as `agentstream serve ingress` runs it, for `bench.ingress_throughput --http`.

With `--fixed-principal JSON` the credential check is replaced by that principal
(`app.dependency_overrides[authenticate]`): the "without auth" side of the comparison, otherwise
the same process, the same app and the same settings.

    python bench/ingress_http_service.py --config c.yaml --host 127.0.0.1 --port 8181 [--fixed-principal '{...}']
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence

from agentstream.auth import Principal, authenticate
from agentstream.config import load_settings
from agentstream.host import ServiceHost, install_stop_signals
from agentstream.kafka import create_topics
from agentstream.observability import configure_logging
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress


def as_dependency(principal: Principal) -> Callable[[], Awaitable[Principal]]:
    """An *async* dependency, like `authenticate`: FastAPI runs a plain function (a `lambda`) in its
    thread pool, a hop that costs more than checking a key and would flatter the authenticated side."""

    async def fixed_principal() -> Principal:
        return principal

    return fixed_principal


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fixed-principal", help="Principal JSON every request is taken to come from")
    args = parser.parse_args(argv)
    settings = load_settings(args.config)
    configure_logging(settings.log_level)
    fixed = Principal.model_validate_json(args.fixed_principal) if args.fixed_principal else None

    async def run() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        if settings.kafka.auto_create_topics:
            await create_topics(settings.kafka)
        svc = bootstrap_ingress(settings)
        if fixed is not None:
            svc.http.dependency_overrides[authenticate] = as_dependency(fixed)
        async with ServiceHost([svc], args.host, {"ingress": args.port}):
            await stop.wait()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
