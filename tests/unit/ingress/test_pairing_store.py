"""`agentstream pairing approve CODE` against a real (SQLite) database."""

import asyncio
import json

from typer.testing import CliRunner

from agentstream.config.ingress import PairingSettings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_ingress.pairing_store import PairingStore
from agentstream_stack.cli import app


async def _issue_and_check(url: str, code: str | None = None) -> tuple[str | None, bool]:
    await upgrade(url)
    engine = create_engine(url)
    try:
        store = PairingStore(session_factory(engine), PairingSettings())
        issued = (await store.issue("telegram", "u-7", "u-7")).code if code is None else code
        return issued, await store.is_paired("telegram", "u-7")
    finally:
        await engine.dispose()


def test_approve_lets_the_user_through(tmp_path, monkeypatch):
    url = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    monkeypatch.setenv("AGENTSTREAM__DATABASE__URL", url)
    code, paired = asyncio.run(_issue_and_check(url))
    assert code is not None and not paired
    runner = CliRunner()
    wrong = runner.invoke(app, ["pairing", "approve", "ZZZZZZZZ"])
    assert wrong.exit_code == 1 and "unknown" in wrong.output
    wrong_json = runner.invoke(app, ["pairing", "approve", "ZZZZZZZ2", "--json"])
    assert wrong_json.exit_code == 1
    doc = json.loads(wrong_json.output)
    assert doc["outcome"] == "unknown" and doc["user_id"] is None
    ok = runner.invoke(app, ["pairing", "approve", code, "--platform", "telegram"])
    assert ok.exit_code == 0, ok.output
    assert "approved telegram user u-7" in ok.output
    assert asyncio.run(_issue_and_check(url, code))[1]
