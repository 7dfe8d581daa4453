"""docs/persistence.md lists every read-API route and the page bounds the code enforces."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.routing import APIRoute
from sqlalchemy.ext.asyncio import async_sessionmaker

from agentstream_persistence.api import add_routes
from agentstream_persistence.pages import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

DOC = (Path(__file__).parents[3] / "docs" / "persistence.md").read_text(encoding="utf-8")


def test_every_read_api_route_is_documented() -> None:
    app = FastAPI()
    add_routes(app, async_sessionmaker())  # never opened: only the routes are read
    paths = [r.path.replace(":path}", "}") for r in app.routes if isinstance(r, APIRoute)]
    assert len(paths) == 5
    for path in paths:
        assert f"`GET {path}`" in DOC, f"docs/persistence.md does not list GET {path}"


def test_page_bounds_are_documented() -> None:
    assert f"default {DEFAULT_PAGE_SIZE}, at most {MAX_PAGE_SIZE}" in DOC
