"""Delivery's receipts at a stop, on the real broker: those queued go out before the producer closes,
and what a stop's bound leaves unpublished is said once, with its count."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from agentstream.contracts.deliveries import LedgerState
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import app as delivery_app
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.ledger import LedgerEntry, LedgerScope
from agentstream_testing.kafka import read_to_end, read_until

pytestmark = pytest.mark.integration

SCOPE = LedgerScope(platform="memory", chat_id="42", root_run_id="run-1", conversation_key="memory:42")
RECEIPTS = 2_000
# The stop's wait for the queue (5 s) is a bound for a stuck broker, not what this test is about: at
# load ~9 on two cores 2,000 receipts once took longer (make-test run 18). Here it cannot run out.
UNBOUNDED_S = 120.0


async def test_receipts_queued_before_a_stop_are_published_before_the_producer_closes(  # type: ignore[no-untyped-def]
    settings_factory, topics_created, monkeypatch
):
    """Before, the receipts left in the queue were published one broker round trip each until the
    stop closed the producer, and every one after failed with its own warning (`ProducerClosed`)."""
    monkeypatch.setattr(delivery_app, "RECEIPTS_ON_STOP_S", UNBOUNDED_S)
    settings = settings_factory()
    svc = bootstrap_delivery(settings)
    with capture_logs() as logs:
        async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
            for segment in range(RECEIPTS):  # what a burst of streams recorded just before the stop
                await svc.receipts.put(LedgerEntry(segment, LedgerState.SENT, str(segment)).receipt(SCOPE))
    said = [line for line in logs if "receipt" in line["event"]]
    assert svc.receipts.pending() == 0 and not said, said  # none left, nothing to say
    records = await read_until(settings.kafka.bootstrap_servers, svc.topics.deliveries, lambda rs: len(rs) >= RECEIPTS)
    assert len(records) == RECEIPTS


async def test_receipts_a_stop_could_not_wait_for_are_counted_in_one_warning(  # type: ignore[no-untyped-def]
    settings_factory, topics_created, monkeypatch
):
    """A stop that waits for none of the queue (its bound run out at once) leaves the queued receipts to
    the ledger rows, and says how many in one line, not one line each."""
    monkeypatch.setattr(delivery_app, "RECEIPTS_ON_STOP_S", 0.0)
    settings = settings_factory()
    svc = bootstrap_delivery(settings)
    with capture_logs() as logs:
        async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
            for segment in range(RECEIPTS):
                await svc.receipts.put(LedgerEntry(segment, LedgerState.SENT, str(segment)).receipt(SCOPE))
    said = [line for line in logs if "receipt" in line["event"]]
    assert [line["event"] for line in said] == ["delivery receipts not published: the service stopped"], said
    left = said[0]["receipts"]
    published = len(await read_to_end(settings.kafka.bootstrap_servers, svc.topics.deliveries))
    # The queue was not drained, and nothing was published twice; a wave already handed to the producer
    # may still have gone out with its stop.
    assert 0 < left <= RECEIPTS and published <= RECEIPTS - left, (left, published)
