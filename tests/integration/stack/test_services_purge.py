"""The running services purge on their own: ingress its dedupe rows, delivery its ledger,
persistence the history — each counted on its own `/metrics`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import func, select

from agentstream.config import Settings
from agentstream.db import Message, create_engine, session_factory, upgrade
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.db.models_ingress import InboundDedupe
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS

OLD = datetime.now(UTC) - timedelta(days=40)


async def test_each_service_purges_its_tables_periodically(
    db_url: str, settings_factory: Callable[..., Settings], topics_created: str
) -> None:
    settings = settings_factory(db_url=db_url, retention={"interval_s": 0.2, "history_days": 30})
    await upgrade(db_url)
    engine = create_engine(db_url)
    sessions = session_factory(engine)
    async with sessions.begin() as s:
        s.add(InboundDedupe(source="kafka", platform="telegram", message_id="1", received_at=OLD))
        s.add(
            DeliveryLedger(
                platform="telegram",
                chat_id="c",
                root_run_id="r",
                segment=0,
                conversation_key="k",
                state="sent",
                updated_at=OLD,
            )
        )
        s.add(
            Message(
                conversation_key="k",
                root_run_id="r",
                run_id="r",
                seq=0,
                part=0,
                role="user",
                content="hi",
                created_at=OLD,
            )
        )
    services = [bootstrap_ingress(settings), bootstrap_delivery(settings), bootstrap_persistence(settings)]
    ports = {svc.name: free_port() for svc in services}
    expected = {"ingress": "inbound_dedupe", "delivery": "delivery_ledger", "persistence": "messages"}
    try:
        async with ServiceHost(services, "127.0.0.1", ports) as host, httpx.AsyncClient(headers=ADMIN_HEADERS) as http:
            purged: dict[str, bool] = {}
            for _ in range(150):
                for name, table in expected.items():
                    metrics = (await http.get(f"{host.url(name)}/metrics")).text
                    purged[name] = f'agentstream_purged_rows_total{{table="{table}"}} 1.0' in metrics
                if all(purged.values()):
                    break
                await asyncio.sleep(0.1)
            assert purged == dict.fromkeys(expected, True)
        async with sessions() as s:
            for model in (InboundDedupe, DeliveryLedger, Message):
                assert await s.scalar(select(func.count()).select_from(model)) == 0
    finally:
        await engine.dispose()
