"""`/readyz`: every check's result, and why a failing check fails."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry

from agentstream.auth import Authenticator
from agentstream.config import load_settings
from agentstream.observability import NotReady, http_app


async def _ok() -> bool:
    return True


async def _false() -> bool:
    return False


async def _not_ready() -> bool:
    raise NotReady("no connector configured (connectors: [])")


async def _crashes() -> bool:
    raise ConnectionRefusedError("postgresql://agentstream:s3cret@db:5432 refused")


async def _readyz(checks: dict) -> httpx.Response:
    settings = load_settings()
    app = http_app("svc", CollectorRegistry(), checks, Authenticator(settings.auth, settings.database.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        return await http.get("/readyz")


async def test_all_checks_pass_ready_with_no_reasons() -> None:
    response = await _readyz({"broker": _ok, "database": _ok})
    assert response.status_code == 200
    assert response.json() == {
        "ready": True,
        "service": "svc",
        "checks": {"broker": True, "database": True},
        "reasons": {},
    }


async def test_a_failing_check_carries_its_reason() -> None:
    response = await _readyz({"broker": _ok, "connectors": _not_ready, "database": _false})
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert body["checks"] == {"broker": True, "connectors": False, "database": False}
    # A check that only answers False has nothing to say; a NotReady says why.
    assert body["reasons"] == {"connectors": "no connector configured (connectors: [])"}


async def test_an_exception_names_its_type_never_its_text() -> None:
    # /readyz answers without a credential, so nothing it says may leak.
    response = await _readyz({"database": _crashes})
    assert response.status_code == 503
    assert response.json()["reasons"] == {"database": "ConnectionRefusedError"}
    assert "s3cret" not in response.text
