"""`agentstream topics create`: every topic with the configured partitions."""

from __future__ import annotations

import asyncio

import typer

from agentstream_stack.cli_support import ConfigOpt, JsonOpt, load_or_exit, out, print_json

topics_app = typer.Typer(no_args_is_help=True, add_completion=False)


@topics_app.command("create")
def topics_create(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Create every topic with the configured partition count (existing ones are kept)."""
    from agentstream.kafka import create_topics

    settings = load_or_exit(config)
    created = asyncio.run(create_topics(settings.kafka))
    if as_json:
        print_json({"created": created, "prefix": settings.kafka.topic_prefix, "partitions": settings.kafka.partitions})
        return
    kept = "every topic existed already" if not created else f"created {len(created)}: {', '.join(created)}"
    out.print(
        f"topics (prefix {settings.kafka.topic_prefix!r}, {settings.kafka.partitions} partitions): {kept}",
        highlight=False,
    )
