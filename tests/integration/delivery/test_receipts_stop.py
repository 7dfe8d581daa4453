"""Delivery's receipts at a stop, on the real broker: those queued go out before the producer closes."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.ledger import LedgerEntry, LedgerScope
from agentstream_testing.kafka import read_until

pytestmark = pytest.mark.integration

SCOPE = LedgerScope(platform="memory", chat_id="42", root_run_id="run-1", conversation_key="memory:42")
RECEIPTS = 2_000


async def test_receipts_queued_before_a_stop_are_published_before_the_producer_closes(settings_factory, topics_created):  # type: ignore[no-untyped-def]
    """Before, the receipts left in the queue were published one broker round trip each until the
    stop closed the producer, and every one after failed with its own warning (`ProducerClosed`)."""
    from agentstream.contracts.deliveries import LedgerState

    settings = settings_factory()
    svc = bootstrap_delivery(settings)
    with capture_logs() as logs:
        async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
            for segment in range(RECEIPTS):  # what a burst of streams recorded just before the stop
                await svc.receipts.put(LedgerEntry(segment, LedgerState.SENT, str(segment)).receipt(SCOPE))
    records = await read_until(settings.kafka.bootstrap_servers, svc.topics.deliveries, lambda rs: len(rs) >= RECEIPTS)

    assert len(records) == RECEIPTS and svc.receipts.pending() == 0
    assert not [line for line in logs if "receipt" in line["event"]]  # none lost, nothing to say
