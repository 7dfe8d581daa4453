"""`/docs`: every service's API page, behind a credential, with its OpenAPI document inlined."""

from __future__ import annotations

import json
import re

import httpx
from prometheus_client import CollectorRegistry

from agentstream.api_docs import docs_page
from agentstream.auth import Authenticator
from agentstream.config import load_settings
from agentstream.observability import http_app
from agentstream_testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV

SPEC = re.compile(r"SwaggerUIBundle\(\{spec: (.*), dom_id:")


def _app() -> httpx.AsyncClient:
    settings = load_settings(auth={"admin_token_env": ADMIN_TOKEN_ENV})
    app = http_app("svc", CollectorRegistry(), {}, Authenticator(settings.auth, "sqlite+aiosqlite:///:memory:"))

    @app.get("/v1/things", summary="List the things")
    async def things() -> list[str]:
        return []

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc.test:8181")


async def test_the_docs_page_needs_a_credential() -> None:
    async with _app() as http:
        anonymous = await http.get("/docs")
        wrong = await http.get("/docs", headers={"Authorization": "Bearer nope"})
        admitted = await http.get("/docs", headers=ADMIN_HEADERS)
    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert "Bearer" in anonymous.headers["www-authenticate"] and "swagger" not in anonymous.text.lower()
    assert admitted.status_code == 200 and admitted.headers["content-type"].startswith("text/html")


async def test_the_page_holds_the_services_document_pointed_at_the_service() -> None:
    async with _app() as http:
        page = (await http.get("/docs", headers=ADMIN_HEADERS)).text
    match = SPEC.search(page)
    assert match is not None, page
    spec = json.loads(match.group(1))
    assert spec["paths"]["/v1/things"]["get"]["summary"] == "List the things"
    assert spec["servers"] == [{"url": "http://svc.test:8181"}]
    assert "/docs" not in spec["paths"]  # the page is not part of the API it documents


def test_nothing_in_the_document_can_close_the_pages_script() -> None:
    hostile = {"info": {"title": "<b>x</b>"}, "paths": {"/a": {"get": {"description": "</script><script>alert(1)"}}}}
    page = docs_page(hostile, "http://h/")
    assert page.count("</script>") == 2  # the two of the page itself
    assert "<title>&lt;b&gt;x&lt;/b&gt;</title>" in page
    assert json.loads(SPEC.search(page).group(1))["paths"]["/a"]["get"]["description"].startswith("</script>")


def test_every_asset_from_the_cdn_is_pinned_and_checked_by_integrity() -> None:
    """The page runs with a credential in reach: a changed CDN file must be refused by the browser."""
    page = docs_page({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}}, "http://x")
    external = re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"https?://[^\"]+\"[^>]*>", page)
    assert len(external) == 2
    for tag in external:
        assert re.search(r'integrity="sha384-[A-Za-z0-9+/]{64}"', tag), tag
        assert 'crossorigin="anonymous"' in tag
        # An exact version: a range (`@5`) would serve new bytes the hash refuses.
        assert re.search(r"swagger-ui-dist@\d+\.\d+\.\d+/", tag), tag
