"""Secrets never in logs: URL masking, the structlog processor, and `configure_logging` wiring it in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agentstream.config import load_settings
from agentstream.observability import configure_logging
from agentstream.secrets_mask import (
    MASK,
    forget_secrets,
    mask_secrets,
    mask_text,
    mask_url,
    register_secret,
    registered_secrets,
    settings_secrets,
)
from agentstream_testing.logs import logging_restored

BOT_TOKEN = "123456789:AAHk3jW9qLmN0pRsTuVwXyZ4bCdEfGhIjKl"
WEBHOOK_SECRET = "wh-secret-6b1f0c2a"
API_KEY = "conn-key-9f8e7d6c5b4a"
DB_PASSWORD = "pg-pass-31415"
AGSK = "agsk_k7Hd2_" + "Zx81Qw72Er63Ty54Ui45"


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (
            f"https://api.telegram.org/bot{BOT_TOKEN}/sendMessage",
            f"https://api.telegram.org/bot123456789:{MASK}/sendMessage",
        ),
        (
            f"http://127.0.0.1:9/file/bot{BOT_TOKEN}/photos/a.jpg",
            f"http://127.0.0.1:9/file/bot123456789:{MASK}/photos/a.jpg",
        ),
        (
            "https://discord.com/api/webhooks/1234/abcDEF-secret?wait=true",
            f"https://discord.com/api/webhooks/1234/{MASK}?wait=true",
        ),
        ("https://hooks.slack.com/services/T01/B02/XyZsecret", f"https://hooks.slack.com/services/T01/B02/{MASK}"),
        ("postgresql+psycopg://app:hunter22@db:5432/x", f"postgresql+psycopg://app:{MASK}@db:5432/x"),
        (
            "https://x.io/cb?token=abc123&page=2&api_key=k1&X-Amz-Signature=ff00&sig=9",
            f"https://x.io/cb?token={MASK}&page=2&api_key={MASK}&X-Amz-Signature={MASK}&sig={MASK}",
        ),
        (
            "https://x.io/a?access_token=t0k&client_secret=s3c&keyword=cats&monkey=1",
            f"https://x.io/a?access_token={MASK}&client_secret={MASK}&keyword=cats&monkey=1",
        ),
        ("https://example.com/docs/bottle?page=1", "https://example.com/docs/bottle?page=1"),  # nothing to mask
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert mask_url(f"POST {url} failed") == f"POST {masked} failed"  # inside text too


def test_api_keys_and_bearer_credentials_are_masked_always() -> None:
    assert mask_text(f"key {AGSK} used") == f"key agsk_k7Hd2_{MASK} used"
    assert mask_text("Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9.x") == f"Authorization: Bearer {MASK}"
    assert mask_text("authorization: bearer abcdefghijklmnop") == f"authorization: bearer {MASK}"
    assert mask_text("agsk_k7Hd2_short and Bearer abc") == "agsk_k7Hd2_short and Bearer abc"  # not key-shaped


def test_registered_values_are_masked_anywhere_but_short_ones_are_ignored() -> None:
    register_secret(WEBHOOK_SECRET)
    register_secret("abc12")  # shorter than 6: would mask ordinary words
    register_secret(None)
    assert registered_secrets() == (WEBHOOK_SECRET,)
    assert mask_text(f"x{WEBHOOK_SECRET}y abc12") == f"x{MASK}y abc12"


def test_a_secret_containing_another_is_masked_whole() -> None:
    register_secret("secret-123")
    register_secret("prefix-secret-123-suffix")
    assert mask_text("prefix-secret-123-suffix") == MASK


def test_processor_masks_nested_values_and_unknown_objects() -> None:
    register_secret(API_KEY)

    class Thing:
        def __repr__(self) -> str:
            return f"Thing(key={API_KEY})"

    event = {
        "event": f"calling with {API_KEY}",
        "count": 3,
        "ok": True,
        "none": None,
        "nested": {"list": [f"a {API_KEY}", {"deep": (API_KEY, 1.5)}]},
        "obj": Thing(),
        "exception": f"Traceback ...\nValueError: bad key {API_KEY}",
    }
    out = mask_secrets(None, "info", event)
    rendered = json.dumps(out)
    assert API_KEY not in rendered
    assert out["event"] == f"calling with {MASK}" and out["count"] == 3 and out["ok"] is True
    assert out["nested"] == {"list": [f"a {MASK}", {"deep": [MASK, 1.5]}]}
    assert out["obj"] == f"Thing(key={MASK})"
    assert out["exception"].endswith(f"bad key {MASK}")


def test_settings_secrets_walk_every_env_field(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in [
        ("T_BOT", BOT_TOKEN),
        ("T_WH", WEBHOOK_SECRET),
        ("T_KEY", API_KEY),
        ("T_EXTRA", "extra-1234"),
        ("T_HOOK", "hook-hmac-5555"),
        ("T_SHORT", "abc"),
        ("T_FILES", "files-token-77"),
        ("T_TOOL_CALLS", "tool-call-signing-secret-0123456789abcdef"),
    ]:
        monkeypatch.setenv(name, value)
    settings = load_settings(
        database={"url": f"postgresql+psycopg://app:{DB_PASSWORD}@db/x"},
        platforms={"telegram": {"token_env": "T_BOT"}},
        ingress={"webhooks": {"telegram": {"main": {"secret_env": "T_WH"}}}},
        connectors=[{"id": "c", "type": "openai", "model": "m", "api_key_env": "T_KEY"}],
        hooks={"webhooks": [{"url": "http://x", "secret_env": "T_HOOK"}], "security": {"env": ["T_EXTRA"]}},
        tools={
            "mcp_servers": {
                "weather": {"url": "http://x/mcp", "headers_env": {"Authorization": "T_SHORT"}},
                "files": {"command": "files-mcp", "pass_env": ["T_FILES"]},
            },
            "call_secret_env": "T_TOOL_CALLS",
        },
    )
    assert set(settings_secrets(settings)) == {
        BOT_TOKEN,
        WEBHOOK_SECRET,
        API_KEY,
        DB_PASSWORD,
        "extra-1234",
        "hook-hmac-5555",
        "files-token-77",
        "tool-call-signing-secret-0123456789abcdef",
    }


@pytest.fixture
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def test_configure_logging_masks_structlog_and_stdlib_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_logging: None
) -> None:
    monkeypatch.setenv("T_BOT", BOT_TOKEN)
    monkeypatch.setenv("T_KEY", API_KEY)
    settings = load_settings(
        database={"url": f"postgresql+psycopg://app:{DB_PASSWORD}@db/x"},
        platforms={"telegram": {"token_env": "T_BOT"}},
        connectors=[{"id": "c", "type": "openai", "model": "m", "api_key_env": "T_KEY"}],
    )
    log_file = tmp_path / "log.jsonl"
    configure_logging("DEBUG", log_file=str(log_file), settings=settings)
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("httpcore").getEffectiveLevel() == logging.WARNING

    url = f"https://api.telegram.org/bot{BOT_TOKEN}/sendMessage"
    logging.getLogger("httpx").info("HTTP Request: POST %s", url)  # below WARNING: dropped
    structlog.get_logger("svc").info("platform call", url=url, detail={"key": API_KEY})
    logging.getLogger("thirdparty").warning("connect to %s failed", f"postgresql://app:{DB_PASSWORD}@db/x")
    try:
        raise RuntimeError(f"refused key {API_KEY}")
    except RuntimeError:
        structlog.get_logger("svc").exception("boom")
        logging.getLogger("thirdparty").exception("stdlib boom")
    for h in logging.getLogger().handlers:
        h.flush()

    text = log_file.read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["event"] for r in records] == [
        "platform call",
        f"connect to postgresql://app:{MASK}@db/x failed",
        "boom",
        "stdlib boom",
    ]
    for secret in (BOT_TOKEN, API_KEY, DB_PASSWORD, BOT_TOKEN.split(":")[1]):
        assert secret not in text
    assert records[0]["url"] == f"https://api.telegram.org/bot123456789:{MASK}/sendMessage"
    assert records[0]["detail"] == {"key": MASK}
    assert f"RuntimeError: refused key {MASK}" in records[2]["exception"]
    assert f"RuntimeError: refused key {MASK}" in records[3]["exception"]
