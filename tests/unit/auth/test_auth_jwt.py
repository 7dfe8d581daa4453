"""JWTs: HS256 with a shared secret, RS256 through a JWKS served over HTTP; claims map to a principal."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from agentstream.auth import Authenticator, CredentialKind, Scope
from agentstream.config import load_settings

SECRET = "hs256-shared-secret-for-tests-0123456789"


def claims(**extra: Any) -> dict[str, Any]:
    return {
        "sub": "alice",
        "tenant": "acme",
        "scope": "messages:write conversations:read",
        "exp": int(time.time()) + 300,
        **extra,
    }


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_url(rsa_key: rsa.RSAPrivateKey) -> Iterator[str]:
    jwk = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    server.shutdown()


async def test_hs256_token_maps_claims(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    monkeypatch.setenv("JWT_SECRET", SECRET)
    auth = Authenticator(
        load_settings(auth={"jwt": {"hs256_secret_env": "JWT_SECRET", "audience": "agentstream"}}).auth, sqlite_url
    )
    token = jwt.encode(claims(aud="agentstream", platform="web"), SECRET, algorithm="HS256")
    p = await auth.authenticate(token)
    assert p is not None and p.kind is CredentialKind.JWT
    assert (p.tenant_id, p.platform, p.user_id) == ("acme", "web", "alice")
    assert p.scopes == {Scope.MESSAGES_WRITE, Scope.CONVERSATIONS_READ}
    # wrong audience, expired, wrong secret, alg none: refused
    assert await auth.authenticate(jwt.encode(claims(aud="other"), SECRET, algorithm="HS256")) is None
    assert (
        await auth.authenticate(
            jwt.encode(claims(aud="agentstream", exp=int(time.time()) - 120), SECRET, algorithm="HS256")
        )
        is None
    )
    assert await auth.authenticate(jwt.encode(claims(aud="agentstream"), "x" * 40, algorithm="HS256")) is None
    unsigned = jwt.encode(claims(aud="agentstream"), None, algorithm="none")  # type: ignore[arg-type]
    assert await auth.authenticate(unsigned) is None


async def test_rs256_through_jwks(rsa_key: rsa.RSAPrivateKey, jwks_url: str, sqlite_url: str) -> None:
    auth = Authenticator(load_settings(auth={"jwt": {"jwks_url": jwks_url, "issuer": "https://idp"}}).auth, sqlite_url)
    token = jwt.encode(claims(iss="https://idp", scope=["admin"]), rsa_key, algorithm="RS256", headers={"kid": "k1"})
    p = await auth.authenticate(token)
    assert p is not None and p.has(Scope.RUNS_RESUME) and p.platform == "api" and p.tenant_id == "acme"
    assert (
        await auth.authenticate(
            jwt.encode(claims(iss="https://evil"), rsa_key, algorithm="RS256", headers={"kid": "k1"})
        )
        is None
    )
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert (
        await auth.authenticate(jwt.encode(claims(iss="https://idp"), other, algorithm="RS256", headers={"kid": "k1"}))
        is None
    )
    # an HS256 token signed with the public key (algorithm confusion) is refused: no HS256 secret configured
    assert await auth.authenticate(jwt.encode(claims(iss="https://idp"), "k" * 40, algorithm="HS256")) is None


def test_jwks_url_must_be_https() -> None:
    with pytest.raises(Exception, match="https"):
        load_settings(auth={"jwt": {"jwks_url": "http://idp.example/jwks"}})
