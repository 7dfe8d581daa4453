"""Web chat session tokens: signed, expiring, bound to one chat, and no other kind of credential."""

from __future__ import annotations

import time

import jwt
import pytest

from agentstream.auth import WEB_AUDIENCE, WebSessions
from agentstream.auth.jwt_tokens import JwtVerifier
from agentstream.config.auth import JwtSettings, WebSessionSettings

SECRET = "k" * 40


def test_a_token_round_trips_and_expires_after_ttl() -> None:
    sessions = WebSessions(WebSessionSettings(ttl_s=60), secret=SECRET)
    now = time.time()
    token, issued = sessions.issue("chat-1", "alice", "acme", "Alice", now=now)
    session = sessions.verify(token)
    assert session == issued
    assert (session.chat_id, session.user_id, session.tenant_id, session.name) == ("chat-1", "alice", "acme", "Alice")
    assert session.expires_at.timestamp() == int(now + 60)
    expired, _ = sessions.issue("chat-1", "alice", "acme", now=now - 61)
    assert sessions.verify(expired) is None
    assert sessions.verify(None) is None and sessions.verify("") is None and sessions.verify("a.b.c") is None


def test_only_this_secret_and_audience_verify() -> None:
    sessions = WebSessions(WebSessionSettings(), secret=SECRET)
    other, _ = WebSessions(WebSessionSettings(), secret="o" * 40).issue("chat-1", "alice", "default")
    assert sessions.verify(other) is None
    claims = {"chat": "chat-1", "uid": "alice", "tenant": "default", "exp": int(time.time()) + 60}
    no_audience = jwt.encode(claims, SECRET, algorithm="HS256")
    wrong_audience = jwt.encode({**claims, "aud": "somewhere-else"}, SECRET, algorithm="HS256")
    unsigned = jwt.encode({**claims, "aud": WEB_AUDIENCE}, None, algorithm="none")
    assert sessions.verify(no_audience) is None and sessions.verify(wrong_audience) is None
    assert sessions.verify(unsigned) is None
    non_string = jwt.encode({**claims, "aud": WEB_AUDIENCE, "uid": 7}, SECRET, algorithm="HS256")
    assert sessions.verify(non_string) is None


async def test_a_session_token_is_no_api_credential_even_with_a_shared_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTSTREAM_TEST_SHARED_SECRET", SECRET)
    token, _ = WebSessions(WebSessionSettings(), secret=SECRET).issue("chat-1", "alice", "default")
    verifier = JwtVerifier(JwtSettings(hs256_secret_env="AGENTSTREAM_TEST_SHARED_SECRET"))
    assert await verifier.verify(token) is None  # no `sub`: never a principal


def test_secrets_short_missing_or_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        WebSessions(WebSessionSettings(), secret="short")
    random_a, random_b = WebSessions(WebSessionSettings()), WebSessions(WebSessionSettings())
    assert random_a.ephemeral and random_b.ephemeral
    token, _ = random_a.issue("chat-1", "alice", "default")
    assert random_b.verify(token) is None  # another process: another secret
    monkeypatch.setenv("AGENTSTREAM_TEST_WEB_SECRET", SECRET)
    configured = WebSessions(WebSessionSettings(secret_env="AGENTSTREAM_TEST_WEB_SECRET"))
    assert not configured.ephemeral
    token, _ = configured.issue("chat-1", "alice", "default")
    assert WebSessions(WebSessionSettings(), secret=SECRET).verify(token) is not None
