"""Type-checked by mypy (`make lint`, and tests/unit/lib/test_topics_typing.py): a `Topic[R]` takes
only its own records. Each wrong publish below must be an error (mypy: "Cannot infer value of type
parameter R", as no R is both the topic's record type and the record's): `--strict` warns about an
unused `type: ignore`, so if mypy ever accepted one of them, lint would fail on its comment."""

from __future__ import annotations

from agentstream.contracts import (
    InboundMessage,
    RunFinished,
    StartRun,
    ToolCallRequest,
    ToolCallResult,
    ToolCatalogEntry,
)
from agentstream.kafka.topics import EVENTS, INBOUND, RUNS, TOOL_CALLS, TOOL_CATALOG, TOOL_RESULTS
from agentstream.publishing import Publisher
from agentstream.service import Runtime


async def each_record_to_its_topic(
    service: Runtime, message: InboundMessage, ending: RunFinished, start: StartRun, result: ToolCallResult
) -> None:
    await service.publish(INBOUND, message)
    await service.publish(EVENTS, ending)  # one member of the topic's union
    await service.publish(RUNS, start)
    await service.publish(TOOL_RESULTS, result, key="web:a")
    await (await service.publish_nowait(EVENTS, ending))


async def records_to_the_wrong_topic(service: Runtime, message: InboundMessage, ending: RunFinished) -> None:
    await service.publish(EVENTS, message)  # type: ignore[misc]
    await service.publish(INBOUND, ending)  # type: ignore[misc]
    await service.publish_nowait(RUNS, ending)  # type: ignore[misc]


async def through_the_publisher_part(
    publisher: Publisher, ending: RunFinished, request: ToolCallRequest, entry: ToolCatalogEntry
) -> None:
    """What the runner's run ports and the executor's tool catalogue publish, and what they cannot."""
    await publisher.publish_nowait(EVENTS, ending)
    await publisher.publish(TOOL_CALLS, request)
    await publisher.publish_nowait(TOOL_CATALOG, entry)
    await publisher.publish(EVENTS, request)  # type: ignore[misc]
    await publisher.publish_nowait(TOOL_CATALOG, ending)  # type: ignore[misc]
