"""The web adapter's HTTP routes without a browser: page, static files, forwarder errors."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from agentstream.kafka import free_port
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.adapters.web_http import add_web_routes


def client(ingress_url: str) -> httpx.AsyncClient:
    app = FastAPI()
    add_web_routes(app, WebAdapter(), ingress_url, timeout_s=2)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://delivery")


async def test_page_and_static_files_are_served() -> None:
    async with client("http://127.0.0.1:1") as http:
        page = await http.get("/web/chat-1")
        js = await http.get("/web/static/chat.js")
        other = await http.get("/web/static/secrets.txt")
    assert page.status_code == 200 and 'src="static/chat.js"' in page.text
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "EventSource" in js.text
    assert other.status_code == 404


async def test_forwarder_reports_an_unreachable_ingress_and_validates_bodies() -> None:
    async with client(f"http://127.0.0.1:{free_port()}") as http:
        down = await http.post("/v1/web/chat-1/messages", json={"text": "hi"})
        empty = await http.post("/v1/web/chat-1/messages", json={"text": ""})
    assert down.status_code == 502 and "ingress unreachable" in down.json()["detail"]
    assert empty.status_code == 422


async def test_forwarder_refuses_ids_the_inbound_contract_refuses() -> None:
    async with client(f"http://127.0.0.1:{free_port()}") as http:  # nothing listens: a 422 never got that far
        long_chat = await http.post(f"/v1/web/{'c' * 201}/messages", json={"text": "hi"})
        control = await http.post("/v1/web/chat-1/messages", json={"text": "hi", "user_id": "u\u0007"})
    assert long_chat.status_code == 422 and "chat_id" in long_chat.json()["detail"]
    assert control.status_code == 422 and control.json()["detail"].startswith("id: String should match pattern")
