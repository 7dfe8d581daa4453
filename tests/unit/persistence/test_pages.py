"""Keyset pagination of the read API's lists on SQLite and PostgreSQL (no broker).

Every list is read page by page and compared with one fixed expected order (the same on
both engines): rows sharing a timestamp, rows without timestamps, more rows than a page,
and rows written between two page reads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db import Message, Run, create_engine, session_factory, upgrade
from agentstream_persistence.api import add_routes
from agentstream_persistence.pages import MAX_PAGE_SIZE, InvalidCursor
from agentstream_persistence.queries import CONVERSATION_RUNS, RUNS
from agentstream_testing.fixtures import ADMIN_HEADERS, authed_app

KEY, OTHER = "memory:pages", "memory:other"
T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run(
    run_id: str, started: datetime | None, finished: datetime | None, *, key: str = KEY, status: str = "completed"
) -> Run:
    return Run(
        run_id=run_id,
        root_run_id=run_id,
        conversation_key=key,
        status=status,
        text="",
        started_at=started,
        finished_at=finished,
    )


def message(root: str, seq: int, part: int = 0, *, key: str = KEY) -> Message:
    return Message(
        conversation_key=key,
        root_run_id=root,
        run_id=root,
        seq=seq,
        part=part,
        role="user",
        content=f"{root}/{seq}/{part}",
        created_at=at(seq),
    )


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


@pytest.fixture
async def http(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[httpx.AsyncClient]:
    app = authed_app()
    add_routes(app, sessions)
    async with httpx.AsyncClient(
        headers=ADMIN_HEADERS, transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as client:
        yield client


async def add(sessions: async_sessionmaker[AsyncSession], *rows: Any) -> None:
    async with sessions() as s, s.begin():
        s.add_all(rows)


async def page(http: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    resp = await http.get(path, params={k: v for k, v in params.items() if v is not None})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    assert set(body) == {"items", "next_cursor"}
    return body


async def read_all(
    http: httpx.AsyncClient, path: str, field: str, limit: int, cursor: str | None = None, **params: Any
) -> list[list[Any]]:
    """Every page from `cursor` on, as the values of `field` per page."""
    pages = []
    while len(pages) < 50:  # bounded: a cursor that did not advance must fail the test, not hang it
        body = await page(http, path, limit=limit, cursor=cursor, **params)
        pages.append([item[field] for item in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(body["items"]) == limit  # only the last page is short
    raise AssertionError(f"{path}: more than 50 pages")


# started_at, finished_at and run_id chosen so that the order needs every part of the key:
# three runs start at the same time, two have no start (their ending counts), one has neither.
def conversation() -> list[Run]:  # new rows per test: an ORM object once stored is not inserted again
    return [
        run("r-late", at(30), at(31)),
        run("r-tie-b", at(10), at(12)),
        run("r-tie-a", at(10), at(11)),
        run("r-tie-c", at(10), at(10.5)),
        run("r-no-start-2", None, at(20)),
        run("r-no-start-1", None, at(5)),
        run("r-no-times", None, None),
        run("r-first", at(1), at(2)),
        run("x-elsewhere", at(3), at(4), key=OTHER),
    ]


CONVERSATION_ORDER = [
    "r-no-times",
    "r-first",
    "r-no-start-1",
    "r-tie-a",
    "r-tie-b",
    "r-tie-c",
    "r-no-start-2",
    "r-late",
]


async def test_conversation_runs_page_in_one_total_order(sessions, http) -> None:
    await add(sessions, *conversation())
    path = f"/v1/conversations/{KEY}/runs"
    whole = await page(http, path)
    assert [r["run_id"] for r in whole["items"]] == CONVERSATION_ORDER and whole["next_cursor"] is None
    for limit in (1, 2, 3, 7):
        pages = await read_all(http, path, "run_id", limit)
        assert [rid for p in pages for rid in p] == CONVERSATION_ORDER, limit
    assert await read_all(http, path, "run_id", 8) == [CONVERSATION_ORDER]  # exactly one full page: no empty next
    assert (await page(http, "/v1/conversations/memory:nobody/runs")) == {"items": [], "next_cursor": None}


async def test_a_run_stored_between_two_page_reads_is_neither_skipped_nor_repeated(sessions, http) -> None:
    await add(sessions, *conversation())
    path = f"/v1/conversations/{KEY}/runs"
    first = await page(http, path, limit=3)
    assert [r["run_id"] for r in first["items"]] == CONVERSATION_ORDER[:3]
    # A new run (later than all), and one that ties with the cursor's start and sorts after it.
    await add(sessions, run("r-new", at(40), at(41)), run("r-no-start-1b", None, at(5)))
    rest = await read_all(http, path, "run_id", 3, cursor=first["next_cursor"])
    assert [rid for p in rest for rid in p] == ["r-no-start-1b", *CONVERSATION_ORDER[3:], "r-new"]


async def test_messages_page_by_run_start_then_stream_position(sessions, http) -> None:
    await add(
        sessions,
        run("m-second", at(20), at(21)),
        run("m-tie-b", at(10), at(11)),
        run("m-tie-a", at(10), at(12)),
        run("x-other", at(1), at(2), key=OTHER),
    )
    await add(
        sessions,
        *[
            message(root, seq, part)
            for root in ("m-second", "m-tie-b", "m-tie-a")
            for seq, part in ((4, 0), (1, 1), (1, 0))
        ],
        message("m-orphan", 7),  # its run row is missing: it counts as the earliest start
        message("x-other", 1, key=OTHER),
    )
    order = [
        "m-orphan/7/0",
        "m-tie-a/1/0",
        "m-tie-a/1/1",
        "m-tie-a/4/0",
        "m-tie-b/1/0",
        "m-tie-b/1/1",
        "m-tie-b/4/0",
        "m-second/1/0",
        "m-second/1/1",
        "m-second/4/0",
    ]
    path = f"/v1/conversations/{KEY}/messages"
    assert [m["content"] for m in (await page(http, path))["items"]] == order
    for limit in (1, 4, 9):
        pages = await read_all(http, path, "content", limit)
        assert [c for p in pages for c in p] == order, limit

    first = await page(http, path, limit=4)
    await add(sessions, run("m-new", at(50), at(51)), message("m-new", 1), message("m-new", 2))
    rest = await read_all(http, path, "content", 4, cursor=first["next_cursor"])
    assert [c for p in rest for c in p] == [*order[4:], "m-new/1/0", "m-new/2/0"]


def runs_table() -> list[Run]:
    return [
        run("a-failed", at(0), at(10), status="failed"),
        run("b-done", at(0), at(10)),
        run("c-done", at(1), at(10)),
        run("d-stopped", at(2), at(20), key=OTHER, status="interrupted"),
        run("e-done", at(3), at(5), key=OTHER),
        run("f-no-end", at(25), None, status="failed"),
        run("g-no-times", None, None),
    ]


async def test_runs_newest_ending_first_with_filters(sessions, http) -> None:
    await add(sessions, *runs_table())
    newest_first = ["f-no-end", "d-stopped", "c-done", "b-done", "a-failed", "e-done", "g-no-times"]
    assert [r["run_id"] for r in (await page(http, "/v1/runs"))["items"]] == newest_first
    for limit in (1, 2, 4):
        assert [rid for p in await read_all(http, "/v1/runs", "run_id", limit) for rid in p] == newest_first
    failed = await read_all(http, "/v1/runs", "run_id", 1, status="failed")
    assert failed == [["f-no-end"], ["a-failed"]]
    several = await page(http, "/v1/runs", status=["failed", "interrupted"])
    assert [r["run_id"] for r in several["items"]] == ["f-no-end", "d-stopped", "a-failed"]
    other = await page(http, "/v1/runs", conversation_key=OTHER, status="completed")
    assert [r["run_id"] for r in other["items"]] == ["e-done"]

    first = await page(http, "/v1/runs", limit=2)
    await add(sessions, run("h-newest", at(0), at(99)))  # newer than the cursor: on no later page
    rest = await read_all(http, "/v1/runs", "run_id", 2, cursor=first["next_cursor"])
    assert [rid for p in rest for rid in p] == newest_first[2:]


def forged(*values: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.mark.parametrize("path", [f"/v1/conversations/{KEY}/runs", f"/v1/conversations/{KEY}/messages", "/v1/runs"])
async def test_bad_limit_and_cursor_are_refused(sessions, http, path: str) -> None:
    await add(sessions, *conversation(), message("r-first", 1), message("r-first", 2))
    for limit in (MAX_PAGE_SIZE + 1, 0, -1):
        resp = await http.get(path, params={"limit": limit})
        assert resp.status_code == 422, resp.text
        assert "limit" in resp.text and (str(MAX_PAGE_SIZE) in resp.text or limit < 1)
    assert (await http.get(path, params={"limit": MAX_PAGE_SIZE})).status_code == 200
    runs_cursor = (await page(http, "/v1/runs", limit=1))["next_cursor"]
    conversation_cursor = (await page(http, f"/v1/conversations/{KEY}/runs", limit=1))["next_cursor"]
    other_list = conversation_cursor if path == "/v1/runs" else runs_cursor
    for cursor in (
        "",
        "!!!",
        "bm90IGpzb24",
        other_list,
        "A" * 2000,
        forged("runs", "2026-01-01T00:00:00+00:00", 5),  # an int where a run id goes
        forged("runs", "2026-01-01T00:00:00", "r1"),  # no zone
        forged("runs", "2026-01-01T00:00:00+00:00"),  # too short
        forged("conversation-messages", "2026-01-01T00:00:00+00:00", "r1", "1", 0),
    ):
        resp = await http.get(path, params={"cursor": cursor})
        assert (resp.status_code, resp.json()) == (400, {"detail": "invalid cursor"}), (cursor, resp.text)
    assert (await http.get("/v1/runs", params={"status": "lost"})).status_code == 422


def test_cursors_are_url_safe_and_round_trip() -> None:
    key = (datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC), "run/+?=é")
    cursor = RUNS.encode(key)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert RUNS.decode(cursor) == key
    with pytest.raises(InvalidCursor):
        CONVERSATION_RUNS.decode(cursor)
