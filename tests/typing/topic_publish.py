"""Type-checked by mypy (`make lint`, and tests/unit/lib/test_topics_typing.py): a `Topic[R]` takes
only its own records. Each wrong publish below must be an error (mypy: "Cannot infer value of type
parameter R", as no R is both the topic's record type and the record's): `--strict` warns about an
unused `type: ignore`, so if mypy ever accepted one of them, lint would fail on its comment."""

from __future__ import annotations

from agentstream.contracts import InboundMessage, RunFinished, StartRun, ToolCallResult
from agentstream.kafka.topics import EVENTS, INBOUND, RUNS, TOOL_RESULTS
from agentstream.service import Service


async def each_record_to_its_topic(
    service: Service, message: InboundMessage, ending: RunFinished, start: StartRun, result: ToolCallResult
) -> None:
    await service.publish(INBOUND, message)
    await service.publish(EVENTS, ending)  # one member of the topic's union
    await service.publish(RUNS, start)
    await service.publish(TOOL_RESULTS, result, key="web:a")
    await (await service.publish_nowait(EVENTS, ending))


async def records_to_the_wrong_topic(service: Service, message: InboundMessage, ending: RunFinished) -> None:
    await service.publish(EVENTS, message)  # type: ignore[misc]
    await service.publish(INBOUND, ending)  # type: ignore[misc]
    await service.publish_nowait(RUNS, ending)  # type: ignore[misc]
