"""The AsyncAPI document of every topic, generated from the contract models.

The topic registry (`agentstream.kafka.topics.TOPICS`: each topic's record types, key and
producers) and the pydantic models in `agentstream.contracts` are the single source of truth;
this module only describes them to FastStream's AsyncAPI generator. It builds a broker
that is never started (nothing connects anywhere) with, per topic, one subscriber
whose handler is annotated with the topic's record type (the "receive" side) and
one publisher with the same schema (the "send" side).

    python -m agentstream.asyncapi docs/asyncapi.json

A unit test fails when the checked-in `docs/asyncapi.json` differs from what this
produces, so the document cannot drift from the code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI

from agentstream.config import KafkaSettings
from agentstream.kafka.topics import TOPICS, Topics

TITLE = "agentstream"
DEFAULT_PREFIX: str = KafkaSettings.model_fields["topic_prefix"].default


def _typed_handler(record: Any) -> Callable[..., Any]:
    """A no-op handler whose parameter annotation is `record`: FastStream reads the
    payload schema from the handler signature (subscribers take no `schema=`)."""

    async def handler(msg: Any) -> None:
        return None

    handler.__annotations__ = {"msg": record, "return": None}
    return handler


def build_broker(prefix: str = DEFAULT_PREFIX) -> KafkaBroker:
    """A spec-only broker: every topic once as a subscriber and once as a publisher."""
    topics = Topics(prefix)
    broker = KafkaBroker(
        KafkaSettings.model_fields["bootstrap_servers"].default,
        description="Any Kafka-compatible cluster; set kafka.bootstrap_servers.",
    )
    for topic in TOPICS:
        address = topics.name(topic)
        broker.subscriber(address, title=f"{topic.name}:receive", description=topic.description())(
            _typed_handler(topic.record)
        )
        broker.publisher(address, title=f"{topic.name}:send", description=topic.description(), schema=topic.record)
    return broker


def _version() -> str:
    try:
        return metadata.version("agentstream")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0"


def build_document(prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """The AsyncAPI 3.0 document as a JSON-able dict."""
    spec = AsyncAPI(
        build_broker(prefix),
        title=TITLE,
        version=_version(),
        description=(
            "Topics of the agentstream runtime. Every value is a JSON object with `type` (the discriminator), "
            "`id`, `ts` and `v` (schema version); unknown fields are ignored. "
            f"Topic names carry the configurable prefix (here the default `{prefix}`)."
        ),
        schema_version="3.0.0",
    ).to_specification()
    return _canonical(spec.to_jsonable())


def _canonical(document: dict[str, Any]) -> dict[str, Any]:
    """Fix the order of the named sections.

    FastStream collects subscribers in a hash-ordered container, so the raw order
    changes with PYTHONHASHSEED; a checked-in file needs one order. Channels and
    operations follow the topic table (receive, then send); components are sorted.
    """
    rank = {f"{topic.name}:{side}": i for i, topic in enumerate(TOPICS) for side in ("receive", "send")}

    def by_topic(section: dict[str, Any]) -> dict[str, Any]:
        return dict(sorted(section.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))

    document["channels"] = by_topic(document.get("channels", {}))
    document["operations"] = by_topic(document.get("operations", {}))
    components = document.get("components", {})
    for name, section in components.items():
        components[name] = dict(sorted(section.items()))
    return document


def render(prefix: str = DEFAULT_PREFIX) -> str:
    """The document exactly as checked in: 2-space indent, trailing newline."""
    return json.dumps(build_document(prefix), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstream.asyncapi", description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", help="file to write (default: stdout)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"topic prefix (default {DEFAULT_PREFIX!r})")
    args = parser.parse_args(argv)
    text = render(args.prefix)
    if args.output is None:
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
