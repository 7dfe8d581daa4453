"""agent-runner on the real broker: without a connector it is not ready, and says why."""

import httpx

from agentstream.db import upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap


async def _readyz(settings) -> httpx.Response:
    await upgrade(settings.database.url)
    runner = runner_bootstrap(settings)
    port = free_port()
    async with ServiceHost([runner], "127.0.0.1", {runner.name: port}), httpx.AsyncClient(timeout=10) as http:
        return await http.get(f"http://127.0.0.1:{port}/readyz")


async def test_no_connector_is_not_ready_and_says_why(settings_factory, topics_created):
    response = await _readyz(settings_factory(connectors=[]))
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["checks"] == {"broker": True, "database": True, "connectors": False}
    assert body["reasons"] == {"connectors": "no connector configured (connectors: [])"}


async def test_a_configured_connector_is_ready(settings_factory, topics_created):
    response = await _readyz(settings_factory())  # the default: the scripted demo connector
    assert response.status_code == 200, response.text
    assert response.json()["checks"] == {"broker": True, "database": True, "connectors": True}
