"""The command line of a bench that measures against a broker: `--bootstrap` names one, else it
starts an embedded Tansu; the measurement prints as a table or, with `--json`, as one object.

    parser = argparse.ArgumentParser(...)
    add_broker_arguments(parser)
    ...
    return run_cli(parser.parse_args(argv), measure, report_json, format_report)

`measure(args, bootstrap, embedded)` runs the bench on that broker (`embedded`: it is Tansu,
whose tuning the clients apply).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from agentstream.kafka import EmbeddedBroker

R = TypeVar("R")
Measure = Callable[[argparse.Namespace, str, bool], Awaitable[R]]


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", help="broker to use (default: an embedded Tansu)")
    parser.add_argument("--embedded", action="store_true", help="the --bootstrap broker is Tansu")


async def on_broker(args: argparse.Namespace, measure: Measure[R]) -> R:
    if args.bootstrap:
        return await measure(args, args.bootstrap, args.embedded)
    async with EmbeddedBroker() as broker:
        return await measure(args, broker.bootstrap_servers, True)


def run_cli(
    args: argparse.Namespace, measure: Measure[R], as_json: Callable[[R], Any], as_text: Callable[[R], str]
) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    report = asyncio.run(on_broker(args, measure))
    print(json.dumps(as_json(report)) if args.json else as_text(report))
    return 0
