"""FastAPI side of authentication: `requires(Scope.X)` as a route dependency.

401 without a valid credential (with `WWW-Authenticate: Bearer`), 403 when the credential
lacks the scope. The app's `Authenticator` lives in `app.state.auth`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agentstream.auth.authenticator import Authenticator
from agentstream.auth.principal import Principal, Scope

UNAUTHORIZED = HTTPException(
    401,
    "missing or invalid credential (Authorization: Bearer …)",
    headers={"WWW-Authenticate": 'Bearer realm="agentstream"'},
)
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid credential."},
    403: {"description": "The credential lacks the scope this route needs."},
}


def authenticator_of(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


BEARER = HTTPBearer(auto_error=False, description="An API key (`agentstream keys create`) or a JWT.")


async def authenticate(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(BEARER)
) -> Principal:
    """Any valid credential."""
    token = credentials.credentials if credentials is not None else None
    principal = await authenticator_of(request).authenticate(token)
    if principal is None:
        raise UNAUTHORIZED
    return principal


def requires(scope: Scope) -> Any:
    """A dependency that yields the caller's principal when it holds `scope`."""

    async def dependency(principal: Principal = Depends(authenticate)) -> Principal:
        if not principal.has(scope):
            raise HTTPException(403, f"this credential lacks the {scope.value!r} scope")
        return principal

    return Depends(dependency)
